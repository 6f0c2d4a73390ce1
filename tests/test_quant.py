"""Quantized block kernels (cpp/src/quant): layouts against gguf.quants, every SIMD ISA against the
scalar reference, matmul_rows batch invariance, quantization quality and argument validation."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize  # noqa: E402

import specgen  # noqa: E402
from specgen import _testing  # noqa: E402

BLOCK = {T.F32: (1, 4), T.F16: (1, 2), T.BF16: (1, 2), T.Q4_0: (32, 18), T.Q4_1: (32, 20), T.Q5_0: (32, 22),
         T.Q5_1: (32, 24), T.Q8_0: (32, 34), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210),
         T.Q8_K: (256, 292)}
VEC_DOT_TYPE = {T.F32: T.F32, T.F16: T.F32, T.BF16: T.F32, T.Q4_0: T.Q8_0, T.Q4_1: T.Q8_0, T.Q5_0: T.Q8_0,
                T.Q5_1: T.Q8_0, T.Q8_0: T.Q8_0, T.Q4_K: T.Q8_K, T.Q5_K: T.Q8_K, T.Q6_K: T.Q8_K}
WEIGHT_TYPES = list(VEC_DOT_TYPE)
QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q8_K, T.Q4_0, T.Q5_0, T.Q4_K, T.Q5_K, T.Q6_K]
ALL_ISAS = ["scalar", "avx2", "avx512"]


def supported_isas():
    out = []
    best = ALL_ISAS.index(_testing.best_cpu_isa())
    return ALL_ISAS[: best + 1]


@pytest.fixture(autouse=True)
def restore_isa():
    yield
    _testing.set_cpu_isa(_testing.best_cpu_isa())


def row_bytes(t, n):
    bs, ts = BLOCK[t]
    return n // bs * ts


def random_blocks(t, n_blocks, rng):
    """Random bytes of type t whose fp16 scale fields are sane (finite, modest)."""
    bs, ts = BLOCK[t]
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)

    def put_f16(off, lo=0.001, hi=0.1, signed=True):
        v = rng.uniform(lo, hi, size=n_blocks).astype(np.float16)
        if signed:
            v *= rng.choice([-1, 1], size=n_blocks).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(n_blocks, 2)

    if t in (T.Q4_0, T.Q5_0, T.Q8_0):
        put_f16(0)
    elif t in (T.Q4_1, T.Q5_1):
        put_f16(0), put_f16(2)
    elif t in (T.Q4_K, T.Q5_K):
        put_f16(0, signed=False), put_f16(2, signed=False)
    elif t == T.Q6_K:
        put_f16(208)
    elif t in (T.F16,):
        raw = rng.standard_normal(n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    elif t == T.BF16:
        f = rng.standard_normal(n_blocks).astype(np.float32).view(np.uint32) >> 16
        raw = f.astype(np.uint16).view(np.uint8).reshape(n_blocks, 2)
    elif t == T.F32:
        raw = rng.standard_normal(n_blocks).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
    return raw.reshape(-1)


def q8k_activation(x):
    return _testing.quantize_row(int(T.Q8_K), x)


def activation(t, x):
    vt = VEC_DOT_TYPE[t]
    return x.astype(np.float32).view(np.uint8) if vt == T.F32 else _testing.quantize_row(int(vt), x)


# (1) dequantize_row matches gguf's reference
@pytest.mark.parametrize("t", [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K,
                               T.Q6_K])
def test_dequantize_matches_gguf(t):
    rng = np.random.default_rng(int(t))
    bs, _ = BLOCK[t]
    n_blocks = 7 if bs > 1 else 7 * 32
    raw = random_blocks(t, n_blocks, rng)
    n = n_blocks * bs
    ours = _testing.dequantize_row(int(t), raw, n)
    ref = gguf_dequantize(raw, t).reshape(-1).astype(np.float32)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("t", [T.Q8_0, T.Q4_0, T.Q5_0, T.BF16, T.F16])
def test_quantize_matches_gguf_where_it_exists(t):
    x = np.random.default_rng(5).standard_normal(32 * 9).astype(np.float32)
    ours = _testing.quantize_row(int(t), x)
    ref = gguf_quantize(x.reshape(1, -1), t).reshape(-1).view(np.uint8)
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.filterwarnings("ignore:overflow")
def test_fp16_conversion_edge_cases():
    vals = np.array([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e-8, 2.98e-8, 6e-8, 6.1e-5, 1e-4, 3.14159,
                     np.inf, -np.inf], dtype=np.float32)
    x = np.concatenate([vals, np.random.default_rng(0).standard_normal(2)]).astype(np.float32)
    ours = _testing.quantize_row(int(T.F16), x).view(np.float16)
    np.testing.assert_array_equal(ours, x.astype(np.float16))
    back = _testing.dequantize_row(int(T.F16), x.astype(np.float16).view(np.uint8), len(x))
    np.testing.assert_array_equal(back, x.astype(np.float16).astype(np.float32))


# (2) every SIMD ISA against the scalar reference on ragged shapes
@pytest.mark.parametrize("t", WEIGHT_TYPES)
@pytest.mark.parametrize("n_blocks", [1, 2, 3, 7, 13, 20])
def test_vec_dot_isas_match_scalar(t, n_blocks):
    rng = np.random.default_rng(100 * int(t) + n_blocks)
    bs, _ = BLOCK[t]
    n = n_blocks * (bs if bs > 1 else 32)
    if bs == 1:
        w = random_blocks(t, n, rng)
    else:
        w = random_blocks(t, n_blocks, rng)
    x = activation(t, rng.standard_normal(n).astype(np.float32))
    _testing.set_cpu_isa("scalar")
    ref = _testing.vec_dot(int(t), n, w, x)
    # float64 oracle for the reference itself
    wf = _testing.dequantize_row(int(t), w, n).astype(np.float64)
    vt = VEC_DOT_TYPE[t]
    xf = (x.view(np.float32) if vt == T.F32 else _testing.dequantize_row(int(vt), x, n)).astype(np.float64)
    exact = float(wf @ xf)
    scale = float(np.abs(wf) @ np.abs(xf)) + 1e-30
    assert abs(ref - exact) <= 1e-4 * scale
    for isa in supported_isas()[1:]:
        _testing.set_cpu_isa(isa)
        got = _testing.vec_dot(int(t), n, w, x)
        assert abs(got - ref) <= 2e-6 * scale, (isa, got, ref)


# (3) matmul_rows is bit-identical to per-element vec_dot, any token count, every ISA
@pytest.mark.parametrize("isa", ALL_ISAS)
@pytest.mark.parametrize("t", WEIGHT_TYPES)
def test_matmul_rows_bit_identical_to_vec_dot(isa, t):
    if isa not in supported_isas():
        pytest.skip(f"{isa} not supported here")
    _testing.set_cpu_isa(isa)
    rng = np.random.default_rng(7 * int(t))
    bs, _ = BLOCK[t]
    n = 3 * (bs if bs > 1 else 32)
    n_rows = 11
    W = np.concatenate([random_blocks(t, n if bs == 1 else n // bs, rng) for _ in range(n_rows)])
    wrow = row_bytes(t, n)
    for n_tok in range(1, 10):
        X = np.concatenate([activation(t, rng.standard_normal(n).astype(np.float32)) for _ in range(n_tok)])
        xrow = len(X) // n_tok
        Y = _testing.matmul_rows(int(t), W, n_rows, n, X, n_tok)
        assert Y.shape == (n_tok, n_rows)
        for tok in range(n_tok):
            for r in range(n_rows):
                e = _testing.vec_dot(int(t), n, W[r * wrow:(r + 1) * wrow], X[tok * xrow:(tok + 1) * xrow])
                assert Y[tok, r].tobytes() == np.float32(e).tobytes(), (isa, n_tok, tok, r, Y[tok, r], e)


# (3b) the same for batch sizes past the kernels' token tiles and prepared-token chunks (32), rows past
# the 32-row blocks: each token's outputs equal that token alone (the decode path)
@pytest.mark.parametrize("isa", ALL_ISAS)
@pytest.mark.parametrize("t", [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_K, T.Q6_K])
def test_matmul_rows_large_batches_equal_single_token(isa, t):
    if isa not in supported_isas():
        pytest.skip(f"{isa} not supported here")
    _testing.set_cpu_isa(isa)
    rng = np.random.default_rng(11 * int(t))
    bs, _ = BLOCK[t]
    n = 5 * bs
    n_rows = 37
    W = np.concatenate([random_blocks(t, n // bs, rng) for _ in range(n_rows)])
    for n_tok in (31, 32, 33, 45, 70):
        xs = [activation(t, rng.standard_normal(n).astype(np.float32)) for _ in range(n_tok)]
        Y = _testing.matmul_rows(int(t), W, n_rows, n, np.concatenate(xs), n_tok)
        for tok in range(n_tok):
            alone = _testing.matmul_rows(int(t), W, n_rows, n, xs[tok], 1)
            assert Y[tok].tobytes() == alone[0].tobytes(), (isa, n_tok, tok)


# (3c) the rows16 layout (quant/rows16.h): the SIMD kernel (AVX2, AVX-512) equals the scalar reference of its
# order bit for bit, for any row count (a padded last group) and token count (tiles, tails, one token);
# each token's outputs equal that token alone; every row range starting at a group gives the same
# values; and it stays close to the standard kernel (the same products, another summation order).
def rows16_case(t, n_blocks, n_rows, n_tok, seed):
    rng = np.random.default_rng(seed)
    n = n_blocks * BLOCK[t][0]
    W = np.concatenate([random_blocks(t, n_blocks, rng) for _ in range(n_rows)])
    xs = [activation(t, rng.standard_normal(n).astype(np.float32)) for _ in range(n_tok)]
    return n, W, xs


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("t", [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_K, T.Q5_K, T.Q6_K])
def test_rows16_kernel_matches_its_scalar_order(t, isa):
    if isa not in supported_isas():
        pytest.skip(f"{isa} not supported here")
    _testing.set_cpu_isa(isa)
    assert _testing.rows16_available(int(t))
    for n_blocks, n_rows in ((1, 16), (3, 1), (5, 37), (20 if BLOCK[t][0] == 32 else 8, 64)):
        n, W, xs = rows16_case(t, n_blocks, n_rows, 19, 13 * int(t) + n_rows)
        P = _testing.rows16_pack(int(t), W, n_rows, n)
        for n_tok in (1, 2, 3, 7, 8, 9, 16, 19):
            X = np.concatenate(xs[:n_tok])
            Y = _testing.matmul_rows16(int(t), P, n_rows, n, X, n_tok)
            ref = _testing.matmul_rows16_ref(int(t), W, n_rows, n, X, n_tok)
            assert Y.tobytes() == ref.tobytes(), (n_blocks, n_rows, n_tok)
            std = _testing.matmul_rows(int(t), W, n_rows, n, X, n_tok)
            np.testing.assert_allclose(Y, std, rtol=1e-5, atol=1e-5 * float(np.abs(std).max()))
        for tok in (0, 18):
            alone = _testing.matmul_rows16(int(t), P, n_rows, n, xs[tok], 1)
            in_batch = _testing.matmul_rows16(int(t), P, n_rows, n, np.concatenate(xs), 19)[tok]
            assert alone[0].tobytes() == in_batch.tobytes()


@pytest.mark.parametrize("t", [T.Q8_0, T.Q5_0, T.Q4_0, T.Q4_K, T.Q5_K, T.Q6_K])
def test_cpu_backend_computes_repacked_matrices_packed(t):
    """A matrix with a repack slot (as a model's) is computed in rows16 by the CPU backend, and its
    selected rows (NanoSpec / calibration heads) give the same bits as the full product."""
    if not _testing.rows16_available(int(t)):
        pytest.skip("no rows16 kernel on this CPU (AVX2 or AVX-512 VNNI)")
    rng = np.random.default_rng(3 * int(t))
    n_rows, n, n_tok = 37, 768, 5
    W = np.concatenate([random_blocks(t, n // BLOCK[t][0], rng) for _ in range(n_rows)])
    x = rng.standard_normal((n_tok, n)).astype(np.float32)
    X = np.concatenate([activation(t, row) for row in x])
    rows = np.array([36, 0, 17, 17, 5, 16], np.int32)
    for repack, expected in ((True, _testing.matmul_rows16_ref(int(t), W, n_rows, n, X, n_tok)),
                             (False, _testing.matmul_rows(int(t), W, n_rows, n, X, n_tok))):
        y = _testing.backend_matmul("cpu", int(t), W, n_rows, n, x.ravel(), n_tok, repack)
        assert y.tobytes() == expected.tobytes(), repack
        sel = _testing.backend_matmul_selected("cpu", int(t), W, n_rows, n, x.ravel(), n_tok, rows, repack)
        assert sel.tobytes() == np.ascontiguousarray(y[:, rows]).tobytes(), repack


def test_rows16_bad_arguments_raise():
    if not _testing.rows16_available(int(T.Q8_0)):
        pytest.skip("no rows16 kernel on this CPU (AVX2 or AVX-512 VNNI)")
    with pytest.raises(specgen.InvalidParameterError):
        _testing.rows16_pack(int(T.Q5_1), np.zeros(24, np.uint8), 1, 32)
    with pytest.raises(specgen.InvalidParameterError):
        _testing.rows16_pack(int(T.Q8_0), np.zeros(33, np.uint8), 1, 32)
    assert not _testing.rows16_available(int(T.Q5_1))
    _testing.set_cpu_isa("scalar")
    assert not _testing.rows16_available(int(T.Q8_0))


# (4) quantize -> dequantize round trip
RMSE_BOUND = {T.F32: 0.0, T.F16: 5e-4, T.BF16: 4e-3, T.Q8_0: 8e-3, T.Q8_K: 8e-3, T.Q6_K: 2e-2, T.Q5_K: 4e-2,
              T.Q5_0: 4.5e-2, T.Q4_K: 7.5e-2, T.Q4_0: 9e-2}


@pytest.mark.parametrize("t", QUANTIZABLE)
def test_round_trip_error(t):
    x = np.random.default_rng(11).standard_normal(256 * 16).astype(np.float32)
    q = _testing.quantize_row(int(t), x)
    assert len(q) == row_bytes(t, len(x))
    y = _testing.dequantize_row(int(t), q, len(x))
    rmse = float(np.sqrt(np.mean((x - y) ** 2)))
    assert rmse <= RMSE_BOUND[t], (t.name, rmse)


def test_k_quants_beat_legacy_of_same_width():
    x = np.random.default_rng(12).standard_normal(256 * 16).astype(np.float32)

    def rmse(t):
        return float(np.sqrt(np.mean((x - _testing.dequantize_row(int(t), _testing.quantize_row(int(t), x), len(x))) ** 2)))

    assert rmse(T.Q4_K) < rmse(T.Q4_0)
    assert rmse(T.Q5_K) < rmse(T.Q5_0)
    assert rmse(T.Q6_K) < rmse(T.Q5_K)


def test_k_quant_handles_constant_and_zero_rows():
    for t in (T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K, T.Q8_0, T.Q4_0, T.Q5_0):
        for v in (0.0, 1.5, -2.0):
            x = np.full(256, v, dtype=np.float32)
            y = _testing.dequantize_row(int(t), _testing.quantize_row(int(t), x), 256)
            assert np.all(np.isfinite(y))
            assert np.max(np.abs(y - x)) <= 0.05 * abs(v) + 1e-6, (t.name, v)


# (5) bad sizes and names raise
def test_bad_arguments_raise():
    x = np.zeros(100, dtype=np.float32)
    with pytest.raises(specgen.InvalidParameterError):
        _testing.quantize_row(int(T.Q8_0), x)  # not a multiple of 32
    with pytest.raises(ValueError):
        _testing.dequantize_row(int(T.Q4_K), np.zeros(143, dtype=np.uint8), 256)
    with pytest.raises(ValueError):
        _testing.dequantize_row(999, np.zeros(4, dtype=np.uint8), 1)
    w = np.zeros(34, dtype=np.uint8)
    with pytest.raises(ValueError):
        _testing.vec_dot(int(T.Q8_0), 32, w, np.zeros(33, dtype=np.uint8))
    with pytest.raises(ValueError):
        _testing.vec_dot(int(T.Q8_0), 64, w, w)
    with pytest.raises(ValueError):
        _testing.matmul_rows(int(T.Q8_0), np.zeros(68, dtype=np.uint8), 3, 32, w, 1)
    with pytest.raises(specgen.SpecgenNotImplementedError):
        _testing.quantize_row(int(T.Q4_1), np.zeros(32, dtype=np.float32))
    with pytest.raises(ValueError):
        _testing.set_cpu_isa("amx")


def test_isa_selection():
    assert _testing.best_cpu_isa() in ALL_ISAS
    for isa in supported_isas():
        _testing.set_cpu_isa(isa)
        assert _testing.active_cpu_isa() == isa
    for isa in ALL_ISAS[len(supported_isas()):]:
        with pytest.raises(ValueError):
            _testing.set_cpu_isa(isa)


# (6) the SIMD activation quantizers (Q8_0, Q8_K) write the scalar reference's bytes, every input
SIMD_ISAS = ALL_ISAS[1:]
ACT_LENGTHS = {T.Q8_0: [32, 96, 256, 640, 2080], T.Q8_K: [256, 512, 1024, 2816]}
TIES = np.array([2.5, -2.5, -3.5, 0.5, -0.5, 1.5, 64.5, -64.5, 126.5, -126.5, 0.49999997, -0.49999997,
                 np.nextafter(np.float32(2.5), np.float32(0)), np.nextafter(np.float32(2.5), np.float32(9)),
                 0.0, -0.0, 1e-30, 127.0, -127.0], dtype=np.float32)


def scalar_and_isa(t, x, isa):
    if isa not in supported_isas():
        pytest.skip(f"{isa} not supported here")
    _testing.set_cpu_isa("scalar")
    ref = _testing.quantize_row(int(t), x)
    _testing.set_cpu_isa(isa)
    return ref, _testing.quantize_row(int(t), x)


def tie_row(t, n_blocks, rng):
    """Blocks of ties with 127.0 somewhere in each, so amax = 127 and id == 1 in both formats."""
    bs, _ = BLOCK[t]
    x = rng.choice(TIES, size=(n_blocks, bs)).astype(np.float32)
    x[np.arange(n_blocks), rng.integers(0, bs, size=n_blocks)] = 127.0
    return x.reshape(-1)


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", [T.Q8_0, T.Q8_K])
def test_act_quant_random_rows_match_scalar(isa, t):
    rng = np.random.default_rng(600 + int(t))
    for n in ACT_LENGTHS[t]:
        for scale in (1e-3, 1.0, 37.0, 1e4):
            x = (scale * rng.standard_normal(n)).astype(np.float32)
            ref, got = scalar_and_isa(t, x, isa)
            np.testing.assert_array_equal(got, ref, err_msg=f"{isa} {t.name} n={n} scale={scale}")


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", [T.Q8_0, T.Q8_K])
def test_act_quant_ties_match_scalar(isa, t):
    rng = np.random.default_rng(700 + int(t))
    bs, ts = BLOCK[t]
    x = tie_row(t, 8, rng)
    ref, got = scalar_and_isa(t, x, isa)
    np.testing.assert_array_equal(got, ref, err_msg=f"{isa} {t.name}")
    # The reference's rounding itself: Q8_0 is std::round (half away from zero), Q8_K is nearest_int
    # (add +-0.5 in float, then truncate, so 0.49999997 + 0.5 == 1.0 rounds up).
    qs = got.reshape(8, ts)[:, 2:34] if t == T.Q8_0 else got.reshape(8, ts)[:, 4:260]
    q = dict(zip(x.tolist(), qs.view(np.int8).reshape(-1).tolist()))
    assert (q[2.5], q[-2.5], q[-3.5], q[0.5], q[-0.5], q[126.5], q[127.0]) == (3, -3, -4, 1, -1, 127, 127)
    assert q[float(np.float32(0.49999997))] == (0 if t == T.Q8_0 else 1)


@pytest.mark.parametrize("isa", SIMD_ISAS)
@pytest.mark.parametrize("t", [T.Q8_0, T.Q8_K])
def test_act_quant_zero_huge_and_tiny_rows_match_scalar(isa, t):
    rng = np.random.default_rng(800 + int(t))
    n = 2 * BLOCK[t][0]
    rows = [np.zeros(n, dtype=np.float32), np.full(n, -0.0, dtype=np.float32)]
    for huge in (1e20, -3e38, np.finfo(np.float32).max):
        x = rng.standard_normal(n).astype(np.float32)
        x[rng.integers(0, n)] = huge
        rows.append(x)
    # amax this small makes 1/d (or 127/amax) overflow to inf; subnormals make d round to 0
    for tiny in (3e-37, 1e-38, 1e-40, 1e-45):
        rows.append((tiny * rng.choice([-1.0, 0.0, 0.5, 1.0], size=n)).astype(np.float32))
    # blocks of each kind in one row: every block is quantized on its own
    rows.append(np.concatenate([r[:BLOCK[t][0]] for r in rows]))
    for i, x in enumerate(rows):
        ref, got = scalar_and_isa(t, x, isa)
        np.testing.assert_array_equal(got, ref, err_msg=f"{isa} {t.name} row {i}")
    # the tiny rows quantize to zeros (defined, not whatever an inf -> int8 conversion gives)
    ts = BLOCK[t][1]
    tiny = scalar_and_isa(t, rows[-5], isa)[0].reshape(-1, ts)  # 3e-37: the overflowing case
    ints = tiny[:, 2:34] if t == T.Q8_0 else tiny[:, 4:]  # qs (and Q8_K's bsums)
    assert not ints.any()
