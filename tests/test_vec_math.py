"""The CPU backend's element-wise math (cpp/src/backend/vec_math.h): exp_approx, tanh_approx, GELU
(tanh form) and SiLU against numpy float64 on dense grids, and every SIMD version bit-identical to
the scalar reference whatever the row length and split (batch and thread-count invariance)."""
import numpy as np
import pytest

from specgen import _testing

ALL_ISAS = ["scalar", "avx2", "avx512"]
EXP_LO, EXP_HI = np.float32(-87.3365447504), np.float32(88.3762626647949)  # kExpLo, kExpHi

# Measured maxima over the grids below (the bounds leave a little room):
#   exp   0.98 ulp on [kExpLo, kExpHi] (8e-8 relative)      numpy's float32 exp: 2.5 ulp
#   tanh  1.3 ulp on [-12, 12] and tiny |x|
#   silu  3.1 ulp on [-20, 20]
#   gelu  14 ulp for g >= -3 (the old float32 0.5 g (1 + tanhf(u)) loses up to 320 ulp there, and
#         all digits below g = -5, to the cancellation in 1 + tanh(u)); below -3 the result is tiny
#         and its relative error grows with the conditioning of e^{-2u(g)}: ~200 ulp (1.2e-5) at
#         g = -10, where gelu(g) ~ 1e-37.
EXP_MAX_ULP = 1.0
TANH_MAX_ULP = 1.5
SILU_MAX_ULP = 3.5
GELU_MAX_ULP = 16.0


def supported_isas():
    return ALL_ISAS[: ALL_ISAS.index(_testing.best_cpu_isa()) + 1]


@pytest.fixture(autouse=True)
def restore_isa():
    yield
    _testing.set_cpu_isa(_testing.best_cpu_isa())


def ulps(approx, exact):
    """|approx - exact| in units of the float32 spacing at exact."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(approx.astype(np.float64) - exact) / spacing


def grid(lo, hi, n, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([np.linspace(lo, hi, n, dtype=np.float32),
                           rng.uniform(lo, hi, n // 2).astype(np.float32)])


def gelu64(g):
    g = g.astype(np.float64)
    # 0.5 g (1 + tanh(u)) written as g / (1 + e^{-2u}): same function, no cancellation in float64.
    return g / (1.0 + np.exp(-2.0 * np.sqrt(2.0 / np.pi) * (g + 0.044715 * g**3)))


def test_exp_accuracy():
    x = np.concatenate([grid(-90, 90, 4_000_001), grid(-1, 1, 1_000_001, seed=1)])
    a = _testing.vec_exp(x)
    e = np.exp(x.astype(np.float64))
    inside = (x >= EXP_LO) & (x <= EXP_HI)
    u = ulps(a[inside], e[inside])
    assert u.max() <= EXP_MAX_ULP, (u.max(), x[inside][u.argmax()])
    # Below kExpLo (subnormal results) exactly 0; above kExpHi the clamp's value, finite.
    assert np.all(a[x < EXP_LO] == 0)
    assert np.all(a[x > EXP_HI] == _testing.vec_exp(np.float32([EXP_HI]))[0]) and np.isfinite(a).all()
    # Consecutive floats around 0 and the clamp bounds.
    edges = np.array([0.0, -0.0, 1e-30, -1e-30, np.nextafter(EXP_HI, np.float32(0)), EXP_HI,
                      np.nextafter(EXP_LO, np.float32(0)), EXP_LO], dtype=np.float32)
    a = _testing.vec_exp(edges)
    assert a[0] == a[1] == 1.0 and a[2] == a[3] == 1.0
    assert np.all(ulps(a[4:], np.exp(edges[4:].astype(np.float64))) <= EXP_MAX_ULP)


def test_exp_special_values():
    x = np.array([-np.inf, np.inf, np.nan, -1e30, 1e30, -200.0, 200.0], dtype=np.float32)
    a = _testing.vec_exp(x)
    assert a[0] == 0 and a[3] == 0 and a[5] == 0
    assert np.isfinite(a[1]) and a[1] == a[4] == a[6] > 1e38
    assert np.isnan(a[2])


def test_tanh_accuracy():
    x = grid(-12, 12, 2_000_001)
    tiny = np.logspace(-30, 0, 100_001).astype(np.float32)
    x = np.concatenate([x, tiny, -tiny, np.float32([0.625, -0.625, np.nextafter(np.float32(0.625), np.float32(0))])])
    a = _testing.vec_tanh(x)
    u = ulps(a, np.tanh(x.astype(np.float64)))
    assert u.max() <= TANH_MAX_ULP, (u.max(), x[u.argmax()])
    # Odd, within [-1, 1], exactly +-1 once saturated, no NaN for huge inputs.
    assert np.array_equal(_testing.vec_tanh(-x), -a)
    assert np.abs(a).max() <= 1.0
    big = np.float32([9.02, 20.0, 1e10, np.inf, -9.02, -1e30, -np.inf])
    assert np.array_equal(_testing.vec_tanh(big), np.sign(big))


def test_softcap_is_c_tanh_x_over_c():
    """The final-logit soft-cap shared by the full head and NanoSpec's head over S."""
    x = grid(-400, 400, 200_001)
    c = np.float32(30.0)
    got = _testing.vec_softcap(x, float(c))
    want = c * _testing.vec_tanh((x / c).astype(np.float32))  # the same float steps
    assert np.array_equal(got, want)
    assert np.abs(got - 30.0 * np.tanh(x.astype(np.float64) / 30.0)).max() <= 30.0 * 1e-6
    assert np.abs(got).max() <= 30.0


def test_gelu_accuracy():
    g = grid(-20, 20, 4_000_001)
    a = _testing.vec_gelu_mul(g, np.ones_like(g))
    e = gelu64(g)
    main = g >= -3
    u = ulps(a[main], e[main])
    assert u.max() <= GELU_MAX_ULP, (u.max(), g[main][u.argmax()])
    # g < -3: |gelu(g)| < 4e-3 and its float32 evaluation is ill-conditioned; near g = -10 the
    # exp argument passes kExpLo and the result is flushed to 0 (|gelu| < 1e-37 there).
    tail = (g < -3) & (np.abs(e) > 1e-30)
    assert np.max(np.abs(a[tail] - e[tail]) / np.abs(e[tail])) < 1e-4
    assert np.all(np.abs(a[g < -3] - e[g < -3]) <= np.maximum(1e-4 * np.abs(e[g < -3]), 1e-36))
    # Large positive inputs pass through, large negative ones give (signed) ~0, nothing overflows.
    big = np.float32([30.0, 1e10, 1e30, -30.0, -1e10, -1e30])
    b = _testing.vec_gelu_mul(big, np.ones_like(big))
    assert np.array_equal(b[:3], big[:3]) and np.all(np.abs(b[3:]) < 1e-30)
    # times up
    up = np.random.default_rng(2).standard_normal(g.size).astype(np.float32)
    assert np.array_equal(_testing.vec_gelu_mul(g, up), a * up)


def test_silu_accuracy():
    g = grid(-20, 20, 4_000_001)
    a = _testing.vec_silu_mul(g, np.ones_like(g))
    g64 = g.astype(np.float64)
    u = ulps(a, g64 / (1.0 + np.exp(-g64)))
    assert u.max() <= SILU_MAX_ULP, (u.max(), g[u.argmax()])
    big = np.float32([100.0, 1e30, -100.0, -1e30])
    b = _testing.vec_silu_mul(big, np.ones_like(big))
    assert np.array_equal(b[:2], big[:2]) and np.all(np.abs(b[2:]) < 1e-30) and np.isfinite(b).all()


def _exp_sub_sum_reference(x, sub):
    """The documented order: 8 partial sums over whole groups of 8, combined pairwise, then the rest."""
    _testing.set_cpu_isa("scalar")
    e = _testing.vec_exp((x - np.float32(sub)).astype(np.float32))
    n8 = len(e) // 8 * 8
    acc = [np.float32(0)] * 8
    for i in range(0, n8, 8):
        for k in range(8):
            acc[k] = np.float32(acc[k] + e[i + k])
    s = np.float32(np.float32(np.float32(acc[0] + acc[4]) + np.float32(acc[2] + acc[6])) +
                   np.float32(np.float32(acc[1] + acc[5]) + np.float32(acc[3] + acc[7])))
    for v in e[n8:]:
        s = np.float32(s + v)
    return e, s


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 64, 100, 257])
def test_exp_sub_sum_order_and_isas(n):
    x = (np.random.default_rng(n).standard_normal(n) * 8).astype(np.float32)
    sub = float(x.max()) if n else 0.0
    e_ref, s_ref = _exp_sub_sum_reference(x, sub)
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        e, s = _testing.vec_exp_sub_sum(x, sub)
        assert e.tobytes() == e_ref.tobytes(), isa
        assert np.float32(s).tobytes() == s_ref.tobytes(), (isa, s, s_ref)
    if n:
        assert abs(s_ref - np.exp(x.astype(np.float64) - sub).sum()) <= 1e-6 * s_ref


def _kernels():
    rng = np.random.default_rng(3)
    x = np.concatenate([grid(-100, 100, 20_001), (rng.standard_normal(20_000) * 4).astype(np.float32),
                        np.float32([0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, EXP_LO, EXP_HI, 0.625, -0.625])])
    up = rng.standard_normal(x.size).astype(np.float32)
    return {
        "exp": lambda a, b: _testing.vec_exp(a),
        "tanh": lambda a, b: _testing.vec_tanh(a),
        "gelu_mul": _testing.vec_gelu_mul,
        "silu_mul": _testing.vec_silu_mul,
    }, x, up


def test_simd_bit_identical_to_scalar():
    kernels, x, up = _kernels()
    _testing.set_cpu_isa("scalar")
    ref = {k: f(x, up) for k, f in kernels.items()}
    for isa in supported_isas()[1:]:
        _testing.set_cpu_isa(isa)
        for k, f in kernels.items():
            got = f(x, up)
            diff = np.flatnonzero(got.view(np.uint32) != ref[k].view(np.uint32))
            assert diff.size == 0, (isa, k, x[diff[:5]], got[diff[:5]], ref[k][diff[:5]])


@pytest.mark.parametrize("isa", ALL_ISAS)
def test_result_independent_of_split(isa):
    """An element's bits do not depend on the row length or where a chunk starts (thread split)."""
    if isa not in supported_isas():
        pytest.skip(f"{isa} not supported here")
    _testing.set_cpu_isa(isa)
    kernels, x, up = _kernels()
    x, up = x[:1000], up[:1000]
    for k, f in kernels.items():
        whole = f(x, up)
        for cut in (1, 3, 8, 13, 16, 17, 500, 999):
            parts = np.concatenate([f(x[:cut], up[:cut]), f(x[cut:], up[cut:])])
            assert parts.tobytes() == whole.tobytes(), (k, cut)


# ---- attention's loops and greedy's argmax ----------------------------------------------------------

def _dot8_reference(q, k):
    """dot_rows' documented order: 8 partial sums, combined ((0+4) + (1+5)) + ((2+6) + (3+7)), then the rest."""
    n8 = len(q) // 8 * 8
    acc = [np.float32(0)] * 8
    for i in range(0, n8, 8):
        for j in range(8):
            acc[j] = np.float32(acc[j] + np.float32(q[i + j] * k[i + j]))
    s = np.float32(np.float32(np.float32(acc[0] + acc[4]) + np.float32(acc[1] + acc[5])) +
                   np.float32(np.float32(acc[2] + acc[6]) + np.float32(acc[3] + acc[7])))
    for i in range(n8, len(q)):
        s = np.float32(s + np.float32(q[i] * k[i]))
    return s


@pytest.mark.parametrize("n,n_keys", [(0, 3), (1, 1), (7, 5), (8, 4), (13, 9), (64, 7), (256, 6), (80, 1)])
def test_dot_rows_order_on_every_isa(n, n_keys):
    rng = np.random.default_rng(n * 31 + n_keys)
    q = rng.standard_normal(n).astype(np.float32)
    K = rng.standard_normal((n_keys, n)).astype(np.float32)
    ref = np.float32([_dot8_reference(q, K[j]) for j in range(n_keys)])
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        got = _testing.vec_dot_rows(q, K.reshape(-1), n_keys)
        assert got.tobytes() == ref.tobytes(), (isa, got, ref)


def _row_order_sum(start, w, V):
    """start + w[0] V[0] + w[1] V[1] + ... in float32, one row at a time."""
    out = start.copy()
    for j in range(len(w)):
        out = (out + (w[j] * V[j]).astype(np.float32)).astype(np.float32)
    return out


@pytest.mark.parametrize("n,n_rows", [(0, 2), (1, 3), (15, 4), (16, 1), (17, 5), (128, 3), (256, 9), (300, 2)])
def test_weighted_sum_rows_in_row_order_on_every_isa(n, n_rows):
    rng = np.random.default_rng(n * 7 + n_rows)
    w = rng.random(n_rows).astype(np.float32)
    V = rng.standard_normal((n_rows, n)).astype(np.float32)
    ref = _row_order_sum(np.zeros(n, np.float32), w, V)
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        got = _testing.vec_weighted_sum_rows(w, V.reshape(-1), n)
        assert got.tobytes() == ref.tobytes(), isa


@pytest.mark.parametrize("n,n_rows", [(1, 3), (17, 5), (128, 9), (300, 7)])
def test_weighted_sum_rows_add_continues_in_row_order_on_every_isa(n, n_rows):
    # attention takes the rows in blocks (backend/cpu_backend.cpp, attend_group): block after block
    # from zeros must give the one-pass sum's bits, and a start other than zero is continued, not reset.
    rng = np.random.default_rng(n * 5 + n_rows)
    w = rng.random(n_rows).astype(np.float32)
    V = rng.standard_normal((n_rows, n)).astype(np.float32)
    start = rng.standard_normal(n).astype(np.float32)
    ref = _row_order_sum(start, w, V)
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        got = _testing.vec_weighted_sum_rows_add(w, V.reshape(-1), start)
        assert got.tobytes() == ref.tobytes(), isa
        blocks = np.zeros(n, np.float32)
        for j0, j1 in [(0, 2), (2, n_rows - 1), (n_rows - 1, n_rows)]:
            blocks = _testing.vec_weighted_sum_rows_add(w[j0:j1].copy(), V[j0:j1].reshape(-1).copy(), blocks)
        assert blocks.tobytes() == _testing.vec_weighted_sum_rows(w, V.reshape(-1), n).tobytes(), isa


@pytest.mark.parametrize("n,n_q,n_keys", [(128, 6, 130), (128, 4, 7), (64, 3, 4), (13, 5, 9), (16, 2, 3), (8, 7, 1), (200, 1, 6)])
def test_grouped_dot_rows_give_each_query_its_own_bits_on_every_isa(n, n_q, n_keys):
    # attend_group hands the query heads of a kv head (and an item's query rows) to one call; tiles of
    # queries by keys must not change any score.
    rng = np.random.default_rng(n * 13 + n_q * 3 + n_keys)
    Q = rng.standard_normal((n_q, n)).astype(np.float32)
    K = rng.standard_normal((n_keys, n)).astype(np.float32)
    ref = np.float32([[_dot8_reference(Q[i], K[j]) for j in range(n_keys)] for i in range(n_q)])
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        got = _testing.vec_dot_rows_multi(Q.reshape(-1), n_q, K.reshape(-1), n_keys)
        assert got.tobytes() == ref.tobytes(), isa


@pytest.mark.parametrize("n,n_o,n_rows", [(128, 6, 9), (128, 4, 3), (128, 5, 2), (48, 3, 5), (17, 2, 4), (300, 7, 3), (40, 1, 6)])
def test_grouped_weighted_sums_give_each_output_its_own_bits_on_every_isa(n, n_o, n_rows):
    rng = np.random.default_rng(n * 11 + n_o * 5 + n_rows)
    W = rng.random((n_o, n_rows)).astype(np.float32)
    V = rng.standard_normal((n_rows, n)).astype(np.float32)
    O = rng.standard_normal((n_o, n)).astype(np.float32)
    ref = np.concatenate([_row_order_sum(O[i], W[i], V) for i in range(n_o)])
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        got = _testing.vec_weighted_sum_rows_add_multi(W.reshape(-1), n_o, V.reshape(-1), O.reshape(-1))
        assert got.tobytes() == ref.tobytes(), isa


@pytest.mark.parametrize("n", [1, 5, 8, 16, 17, 262144])
def test_argmax_finite_first_maximum_on_every_isa(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    cases = [x]
    if n > 3:
        tie = x.copy()
        tie[[1, n - 1]] = x.max() + 1  # two maxima: the first wins
        zeros = np.full(n, -np.inf, np.float32)
        zeros[[n // 2, 2]] = [0.0, -0.0]  # -0 == +0: the lower index
        cases += [tie, zeros, np.full(n, -np.inf, np.float32)]
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        for c in cases:
            expect = int(np.flatnonzero(c == c.max())[0])
            assert _testing.vec_argmax_finite(c) == expect, isa
        for bad in (np.nan, np.inf):
            y = x.copy()
            y[n - 1] = bad
            assert _testing.vec_argmax_finite(y) == -1, (isa, bad)


@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (16, 16), (17, 16), (33, 5), (5000, 16), (262144, 16)])
def test_top_k_equals_the_scalar_order_on_every_isa(n, k):
    """NanoSpec's top-k over a row (top_ids): every SIMD version keeps the scalar reference's ids in
    its order: the k largest best first, ties to the lower index, NaN only among the first k."""
    rng = np.random.default_rng(n + k)
    x = rng.standard_normal(n).astype(np.float32)
    rising = np.arange(n, dtype=np.float32)  # every element raises the threshold: the worst case
    cases = [x, rising, -rising]
    if n > 20:
        ties = x.copy()
        ties[rng.integers(0, n, n // 4)] = 1.5  # many equal values inside the top k
        holes = x.copy()
        holes[[1, n // 2, n - 1]] = [np.nan, -np.inf, np.nan]  # a NaN before and after the first k
        cases += [ties, holes]
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        for c in cases:
            got = _testing.top_ids(c, k)
            finite = np.where(np.isnan(c), -np.inf, c)
            if not np.isnan(c[:k]).any():  # NaN past the first k never enters: numpy's stable order
                assert got == [int(i) for i in np.argsort(-finite, kind="stable")[:k]], isa
            _testing.set_cpu_isa("scalar")
            assert got == _testing.top_ids(c, k), isa
            _testing.set_cpu_isa(isa)
