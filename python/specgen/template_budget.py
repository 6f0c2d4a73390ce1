"""A jinja2 sandbox that renders under a budget (specgen.chat_template uses it; jinja2 is the server extra).

jinja2's ImmutableSandboxedEnvironment stops a template from reaching Python internals, but not from
running for ever or allocating without bound (``{% for i in range(100000) %}{% for j in range(100000)
%}...``, ``'x' * 10**9``, a macro that calls itself). BudgetedSandbox adds:

- steps: every line of the compiled template that runs (each loop iteration runs at least one) is
  counted by a trace function installed for the render's thread; past ``steps`` the render stops. The
  same trace function checks the wall-clock deadline, so a render stops itself instead of holding its
  thread;
- depth: nested macro calls (a recursive macro stops at ``depth``, never reaching RecursionError);
- chars: no string or list the template builds, and not its output, may exceed ``chars``. Operations
  that can multiply a size in one C call (``*``, ``**``, ``+``, ``%``, ``~``, replace, join, center,
  indent, wordwrap, format widths, tojson's indent) are checked before they run, from their operands'
  sizes; every call's and filter's result after.

Exceeding any of them raises BudgetExceeded (a plain Exception: the sandbox's own handlers do not catch
it), whose message says which limit and its value.
"""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from functools import wraps
from typing import Any, Iterable, Optional

from jinja2.compiler import CodeGenerator, optimizeconst
from jinja2.runtime import Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, _PassArg

# Environment.from_string compiles templates with this file name: the trace function counts only
# lines of template code, not of jinja2's runtime or of Python.
_TEMPLATE_FILENAME = "<template>"
# Big enough for any real chat template's integers; a bigger one is a runaway power or product.
_MAX_INT_BITS = 4096


@dataclass(frozen=True)
class RenderBudget:
    """The most one render may use. The defaults leave a real chat template (tens of lines per message)
    three orders of magnitude of room on the largest conversation a server accepts."""

    steps: int = 2_000_000      # template lines executed, loop iterations included
    seconds: float = 2.0        # wall time
    depth: int = 64             # nested macro calls
    chars: int = 16 << 20       # largest string or list built, and the output

    def __post_init__(self) -> None:
        for name in ("steps", "depth", "chars"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"RenderBudget.{name} must be a positive integer, got {getattr(self, name)!r}")
        if not (isinstance(self.seconds, (int, float)) and self.seconds > 0):
            raise ValueError(f"RenderBudget.seconds must be > 0, got {self.seconds!r}")


class BudgetExceeded(Exception):
    """A render went over its RenderBudget (the message names the limit)."""


class _Meter:
    """One render's use of its budget (the thread that renders owns it)."""

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.steps = 0
        self.depth = 0
        self.chars_out = 0
        self.deadline = time.monotonic() + budget.seconds

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise BudgetExceeded(f"it ran longer than {self.budget.seconds:g} s")

    def trace(self, frame, event, arg):
        # Global trace function: only frames of compiled template code get the line counter.
        return self._line if frame.f_code.co_filename == _TEMPLATE_FILENAME else None

    def _line(self, frame, event, arg):
        if event == "line":
            self.steps += 1
            if self.steps > self.budget.steps:
                raise BudgetExceeded(f"it ran more than {self.budget.steps} steps (template lines, loop iterations included)")
            if not self.steps & 1023:
                self.check_time()
        return self._line


_active = threading.local()


def _meter() -> Optional[_Meter]:
    return getattr(_active, "meter", None)


def _size(x: Any) -> int:
    return len(x) if isinstance(x, (str, bytes, list, tuple, dict, set, frozenset)) else 0


def _int_arg(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


_FORMAT_NUMBER = re.compile(r"\d+")


def _format_width(fmt: Any) -> int:
    """The largest number written in a format string: a width or precision pads to that many chars."""
    if not isinstance(fmt, str):
        return 0
    return max((int(m) if len(m) < 12 else 1 << 62 for m in _FORMAT_NUMBER.findall(fmt)), default=0)


def _estimate(name: str, value: Any, args: tuple, kwargs: dict) -> int:
    """An upper bound of the size of ``value.name(*args)`` (a str method) or ``value|name(*args)`` (a
    filter) for the operations that can multiply sizes; 0 when the operation cannot."""
    n = _size(value)
    if name == "replace":
        old = args[0] if args else kwargs.get("old")
        new = args[1] if len(args) > 1 else kwargs.get("new")
        if isinstance(value, str) and isinstance(old, str) and isinstance(new, str):
            hits = value.count(old) if old else n + 1
            return n + hits * len(new)
    elif name in ("center", "ljust", "rjust", "zfill"):
        return max(n, _int_arg(args[0] if args else kwargs.get("width", 80)))
    elif name == "expandtabs":
        tab = _int_arg(args[0] if args else kwargs.get("tabsize", 8))
        return n + (value.count("\t") * tab if isinstance(value, str) else 0)
    elif name == "indent":
        width = args[0] if args else kwargs.get("width", 4)
        w = len(width) if isinstance(width, str) else _int_arg(width)
        return n + ((value.count("\n") + 1) * w if isinstance(value, str) else 0)
    elif name == "wordwrap":
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring")
        return n + (n + 1) * (len(wrap) if isinstance(wrap, str) else 1)
    elif name in ("format", "format_map"):
        return n + _format_width(value) + sum(_size(a) for a in args) + sum(_size(v) for v in kwargs.values())
    elif name == "tojson":
        indent = _int_arg(kwargs.get("indent")) or next((_int_arg(a) for a in args if _int_arg(a)), 0)
        if indent:
            try:
                compact = len(json.dumps(value, ensure_ascii=False, default=str))
            except (TypeError, ValueError, RecursionError):
                return 0
            return compact * (1 + indent)
    return 0


class _BudgetedCodeGenerator(CodeGenerator):
    """Compiles ``a ~ b`` to a size-checked join (jinja2 calls its own str_join, which no sandbox hook sees)."""

    @optimizeconst
    def visit_Concat(self, node, frame) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("), context.eval_ctx.autoescape)")


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment + RenderBudget (module docstring). ``render(template, **vars)``
    renders under the budget on the calling thread."""

    code_generator_class = _BudgetedCodeGenerator
    # Intercepted operators are never folded into constants at compile time either: '{{ 10**10**10 }}'
    # cannot hang the compiler.
    intercepted_binops = frozenset(["*", "**", "+", "%"])

    def __init__(self, budget: RenderBudget, *, filters: Optional[dict] = None, globals: Optional[dict] = None,
                 **options: Any) -> None:
        super().__init__(**options)
        self.budget = budget
        self.filters.update(filters or {})
        self.filters = {name: self._guarded_filter(name, f) for name, f in self.filters.items()}
        self.globals.update(globals or {})
        self.globals["namespace"] = self._namespace_class()

    # -- limits ---------------------------------------------------------------------------------
    def _fits(self, n: int, what: str) -> None:
        if n > self.budget.chars:
            raise BudgetExceeded(f"{what} would hold more than {self.budget.chars} characters")

    def _check_value(self, x: Any, what: str) -> Any:
        self._fits(_size(x), what)
        if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > _MAX_INT_BITS:
            raise BudgetExceeded(f"{what} is an integer of more than {_MAX_INT_BITS} bits")
        return x

    def _join_size(self, items: Iterable[Any], sep: Any) -> int:
        n = 0
        for i, x in enumerate(items):
            n += (len(x) if isinstance(x, str) else len(str(x))) + (_size(sep) if i else 0)
            if n > self.budget.chars:
                break
        return n

    def _before(self, name: str, value: Any, args: tuple, kwargs: dict, what: str) -> None:
        meter = _meter()
        if meter is not None:
            meter.check_time()
        for a in (value, *args, *kwargs.values()):
            self._check_value(a, what + "'s argument")
        self._fits(_estimate(name, value, args, kwargs), what)

    # -- hooks ----------------------------------------------------------------------------------
    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (jinja2's signature)
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        name = getattr(target, "__name__", "")
        owner = getattr(target, "__self__", None)
        what = f"the macro {__obj.name}" if isinstance(__obj, Macro) else f"the call {name or type(__obj).__name__}()"
        __self._before(name, owner, args, kwargs, what)
        if name == "join" and isinstance(owner, str) and args:
            items = list(args[0])
            __self._fits(__self._join_size(items, owner), what)
            args = (items,) + args[1:]
        meter = _meter()
        if isinstance(__obj, Macro) and meter is not None:
            meter.depth += 1
            try:
                if meter.depth > __self.budget.depth:
                    raise BudgetExceeded(f"its macros nest deeper than {__self.budget.depth} calls")
                return __self._check_value(super().call(__context, __obj, *args, **kwargs), what)
            finally:
                meter.depth -= 1
        return __self._check_value(super().call(__context, __obj, *args, **kwargs), what)

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        what = f"'{operator}'"
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * abs(left).bit_length() > _MAX_INT_BITS:
                raise BudgetExceeded(f"{what} would make an integer of more than {_MAX_INT_BITS} bits")
        elif operator == "*":
            for seq, times in ((left, right), (right, left)):
                if _size(seq) and isinstance(times, int):
                    self._fits(_size(seq) * max(times, 0), what)
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
                    raise BudgetExceeded(f"{what} would make an integer of more than {_MAX_INT_BITS} bits")
        elif operator == "+" and _size(left) and _size(right):
            self._fits(_size(left) + _size(right), what)
        elif operator == "%" and isinstance(left, str):
            extra = sum(_size(a) for a in (right if isinstance(right, tuple) else (right,)))
            self._fits(len(left) + _format_width(left) + extra, what)
        return self._check_value(super().call_binop(context, operator, left, right), what)

    def checked_concat(self, values: tuple, autoescape: bool) -> str:
        """``a ~ b ~ ...`` (_BudgetedCodeGenerator)."""
        self._fits(self._join_size(values, ""), "'~'")
        return markup_join(values) if autoescape else str_join(values)

    def concat(self, parts) -> str:  # joins the output of {% set x %}...{% endset %} and of macros
        parts = list(parts)
        self._fits(self._join_size(parts, ""), "a block's output")
        return "".join(parts)

    def _guarded_filter(self, name: str, f):
        skip_first = _PassArg.from_obj(f) is not None  # context/environment comes first

        @wraps(f)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            rest = args[1:] if skip_first else args
            value, fargs = (rest[0], rest[1:]) if rest else (None, ())
            what = f"the filter {name}"
            self._before(name, value, fargs, kwargs, what)
            if name == "join" and value is not None and not isinstance(value, str):
                items = list(value)
                sep = fargs[0] if fargs else kwargs.get("d", "")
                self._fits(self._join_size(items, sep), what)
                args = args[:len(args) - len(rest)] + (items,) + tuple(fargs)
            return self._check_value(f(*args, **kwargs), what)

        return guarded

    def _namespace_class(self):
        env = self

        class BudgetedNamespace(Namespace):
            # {% set ns.x = ns.x ~ ns.x %} in a loop grows a value across iterations: each assignment is checked.
            def __setitem__(self, name: str, value: Any) -> None:
                env._check_value(value, f"namespace attribute {name!r}")
                super().__setitem__(name, value)

        return BudgetedNamespace

    # -- rendering ------------------------------------------------------------------------------
    def render(self, template, **variables: Any) -> str:
        """``template`` (compiled by this environment) rendered under the budget on this thread.
        Raises BudgetExceeded, or what the template raised."""
        meter = _Meter(self.budget)
        previous_meter, previous_trace = _meter(), sys.gettrace()
        _active.meter = meter
        sys.settrace(meter.trace)
        try:
            out = []
            for chunk in template.generate(**variables):
                meter.chars_out += len(chunk)
                self._fits(meter.chars_out, "the output")
                out.append(chunk)
            return "".join(out)
        finally:
            sys.settrace(previous_trace)
            _active.meter = previous_meter
