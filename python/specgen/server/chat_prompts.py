"""Chat messages -> prompt tokens for the server, off the event loop.

Renders run on a small pool of their own, not Starlette's shared one: a template that runs to its
budget (specgen.template_budget: it stops itself at its step or time limit) can hold only these
threads, never the ones completions tokenize on. The template was compiled once, with the app.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List

from specgen import openai_compat as oc
from specgen.chat_template import ChatTemplate, ChatTemplateError

# Rendering holds the GIL, so more threads would not render faster.
RENDER_THREADS = 2
# A render stops itself at its time budget; this is the backstop for one long C-level operation.
_GRACE_S = 5.0


class ChatPrompts:
    def __init__(self, generator, template: ChatTemplate) -> None:
        self.generator = generator
        self.template = template
        self._pool = ThreadPoolExecutor(max_workers=RENDER_THREADS, thread_name_prefix="specgen-template")

    async def tokens(self, messages: List[Dict[str, Any]]) -> List[int]:
        """The prompt's token ids (the template's errors as ChatTemplateError / InvalidParameterError)."""
        loop = asyncio.get_running_loop()
        render = loop.run_in_executor(self._pool, oc.chat_prompt_tokens, self.generator, self.template, messages)
        limit = self.template.budget.seconds + _GRACE_S
        try:
            return await asyncio.wait_for(render, limit)
        except asyncio.TimeoutError:
            raise ChatTemplateError(f"the chat template went over its budget: it did not finish within {limit:g} s") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
