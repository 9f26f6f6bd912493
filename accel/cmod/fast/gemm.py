"""The integer GEMM engine: exact int8 GEMMs, fast.

The convolution's sums of products are exact integers however they are computed
(:func:`accel.cmod.cmac.conv_gemm` is the plain form).  This module computes them
faster: onnxruntime's ``MatMulInteger`` on one thread (:class:`IntEngine`, checked
exact on this machine before first use), weight matrices packed once per layer
(:class:`PackedWeights`), and float32 BLAS over chunks of reduction terms short
enough to stay exact (:func:`gemm_sums`).  :class:`Weights` keeps each form a
weight matrix takes, made once.
"""

from __future__ import annotations

import numpy as np

#: int8 x int8 products are at most 2**14 in magnitude ((-128) * (-128)), so any partial sum
#: of 1024 of them stays within 2**24, where float32 holds every integer exactly
EXACT_F32_TERMS = 1 << 10

#: the smallest GEMM (multiply-accumulates) handed to the integer engine (:func:`int_engine`):
#: below it, the engine's fixed cost per call (~20 us) outweighs its speed
INT_ENGINE_MIN_MACS = 1 << 20

#: longest reduction the integer engine takes: it sums products of offset bytes (up to
#: 255 * 255) in int32 before removing the offsets, so 2**15 terms stay below 2**31
INT_ENGINE_MAX_TERMS = 1 << 15


class Weights:
    """An int8 weight matrix ``[..., K, R]`` with the forms the GEMM engines take, each
    made once: float32 for BLAS, offset binary (``w + 128`` as uint8) for the integer
    engine."""

    __slots__ = ("int8", "kernel", "_float32", "_offset", "_taps_last", "_diagonal",
                 "_pointwise", "_selection")

    def __init__(self, w: np.ndarray, kernel: tuple[int, int, int, int] | None = None) -> None:
        self.int8 = w if w.dtype == np.int8 else w.astype(np.int8)
        #: ``(K, C, R, S)`` of a convolution's matrix (columns C major, then R, then S)
        self.kernel = kernel
        self._float32: np.ndarray | None = None
        self._offset: np.ndarray | None = None
        self._taps_last: PackedWeights | None = None
        self._diagonal: np.ndarray | None | bool = False     # False: not looked at yet
        self._pointwise: PackedWeights | None = None
        self._selection: tuple | None | bool = False    # False: not looked at yet

    @property
    def shape(self) -> tuple[int, ...]:
        return self.int8.shape

    @property
    def float32(self) -> np.ndarray:
        if self._float32 is None:
            self._float32 = self.int8.astype(np.float32)
        return self._float32

    @property
    def offset(self) -> np.ndarray:
        if self._offset is None:
            self._offset = to_offset_binary(self.int8)
        return self._offset

    @property
    def diagonal(self) -> np.ndarray | None:
        """int8 ``[K, R * S]``: the taps of a convolution whose every kernel reads only its
        own input channel (:func:`diagonal_taps`), else None (found once)."""
        if self._diagonal is False:
            k, c, r, s = self.kernel or (0, 0, 0, 0)
            taps = (None if self.kernel is None or self.int8.ndim != 2
                    else diagonal_taps(self.int8[None], k, c, r * s))
            self._diagonal = None if taps is None else taps[0]
        return self._diagonal

    @property
    def selection(self) -> tuple[tuple[int, int, int], ...] | None:
        """For a ``[K, C]`` matrix whose every row is all 0 or a single 1 (a 1x1
        convolution that moves channels: concat merges, channel permutations, pixel
        shuffles), the runs ``(first kernel, first input channel, length)`` of kernels
        copying consecutive input channels; else None (found once).  Its sums are the
        input values themselves: :func:`select_sums`."""
        if self._selection is False:
            self._selection = None
            w = self.int8
            if w.ndim == 2 and (self.kernel is None or self.kernel[2:] == (1, 1)):
                ones = w == 1
                if np.count_nonzero(w) == np.count_nonzero(ones) \
                        and int(ones.sum(axis=1).max(initial=0)) <= 1:
                    self._selection = _runs(np.where(ones.any(axis=1), ones.argmax(axis=1),
                                                     -1))
        return self._selection

    def pointwise(self, engine: IntEngine, k_pad: int, c_pad: int) -> PackedWeights:
        """The ``[K, C]`` weights of a 1x1 convolution as ``engine`` keeps them for pixels
        of ``c_pad`` channels (whole atoms) into ``k_pad`` kernels: zeros past ``C``
        and past ``K``, so a pixel's lanes past its channels add nothing and the
        kernels past ``K`` sum to 0 (made once)."""
        if self._pointwise is None or self._pointwise.shape != (k_pad, c_pad):
            k, c = self.int8.shape
            w = np.zeros((k_pad, c_pad), dtype=np.int8)
            w[:k, :c] = self.int8
            self._pointwise = engine.packed(w)
        return self._pointwise

    def taps_last(self, engine: IntEngine, k_pad: int = 0, c_pad: int = 0) -> PackedWeights:
        """The weights as ``engine`` keeps them for :func:`accel.cmod.fast.paths.conv_sums`: columns
        R major, then S, then C (made once).  ``k_pad``, ``c_pad``: kernels and channels
        made up to those with zeros (for pixels of whole atoms into whole atoms of
        outputs, as :meth:`pointwise` pads)."""
        k, c, r, s = self.kernel
        k_pad, c_pad = max(k_pad, k), max(c_pad, c)
        if self._taps_last is None or self._taps_last.shape != (k_pad, r * s * c_pad):
            w = np.zeros((k_pad, r, s, c_pad), dtype=np.int8)
            w[:k, :, :, :c] = self.int8.reshape(k, c, r, s).transpose(0, 2, 3, 1)
            self._taps_last = engine.packed(w.reshape(k_pad, r * s * c_pad))
        return self._taps_last


def diagonal_taps(weights: np.ndarray, k: int, c: int, taps: int) -> np.ndarray | None:
    """int8 ``[B, K, taps]``: the weights ``[B, K, C * taps]`` (C major) when every kernel
    ``i`` of each of them reads only input channel ``i`` (a depthwise layer run as block
    convolutions: the other channels' weights are all 0), else None."""
    if k != c or k == 1:
        return None
    w = weights.reshape(weights.shape[0], k, c, taps)
    if np.any(w[:, ~np.eye(k, dtype=bool)]):
        return None
    return np.ascontiguousarray(w[:, np.arange(k), np.arange(k)])


def _runs(source: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """``(first kernel, first input channel, length)`` of the runs of kernels whose
    ``source`` channels (-1: none) follow one another."""
    runs: list[list[int]] = []
    for k, c in enumerate(source.tolist()):
        if c < 0:
            continue
        if runs and runs[-1][0] + runs[-1][2] == k and runs[-1][1] + runs[-1][2] == c:
            runs[-1][2] += 1
        else:
            runs.append([k, c, 1])
    return tuple(tuple(r) for r in runs)


def select_sums(runs: tuple[tuple[int, int, int], ...], values: np.ndarray, k_pad: int,
                axis: int) -> np.ndarray:
    """int32 sums of a channel-moving 1x1 convolution (:attr:`Weights.selection`'s
    ``runs``) of the int8 ``values``, whose channels run along ``axis`` (0: ``[C, N]``
    patches, giving ``[k_pad, N]``; 1: ``[N, C]`` pixels, giving ``[N, k_pad]``): each
    kernel's sum is its one input's value, 0 for a kernel without one and past the
    kernels."""
    n = values.shape[1 - axis]
    out = np.zeros((k_pad, n) if axis == 0 else (n, k_pad), dtype=np.int32)
    for k0, c0, length in runs:
        if axis == 0:
            out[k0:k0 + length] = values[c0:c0 + length]
        else:
            out[:, k0:k0 + length] = values[:, c0:c0 + length]
    return out


def to_offset_binary(a: np.ndarray) -> np.ndarray:
    """int8 ``a`` as uint8 ``a + 128`` (flipping the sign bit is adding 128 mod 256)."""
    return a.view(np.uint8) ^ np.uint8(0x80)


#: the integer engine's operand forms (:meth:`IntEngine._make`): both operands offset
#: binary; a uint8 operand against an int8 one; an offset-binary one against an int8 one
OFFSET, SIGNED, FULL = "offset", "signed", "full"


class IntEngine:
    """Exact int8 GEMMs on onnxruntime's ``MatMulInteger``, one thread.

    Both operands go in as offset binary (uint8 ``x + 128``) with zero points of 128:
    onnxruntime's uint8 x uint8 kernels widen the bytes to 16 bits before multiplying
    and accumulate in int32, so no product or pair of products saturates on any
    instruction set.  Its uint8 x int8 kernels are faster but, on AVX2 machines
    without VNNI, add pairs of products in 16 bits with saturation: exact only when
    the uint8 operand is at most 127 (a pair is then at most 2 * 127 * 128 < 2**15),
    which holds for non-negative int8 patches taken as they are (zero points 0; see
    :meth:`PackedWeights.run`).  Where they accumulate in 32 bits (AVX-512 VNNI: no
    pair of products is added in 16 bits) they are exact on every uint8 value
    (:attr:`full_range`), and every GEMM goes to them: an offset-binary operand
    against an int8 one, ``(a + 128) @ b`` less ``128 * sum(b)``: the offset operand's
    zero point of 128, which the kernels take back themselves in their output stage
    (:meth:`run_full_range`, :meth:`PackedWeights.run`); on this machine (AMD EPYC,
    AVX-512 VNNI) 0.40-0.58 of the uint8 x uint8 kernels' time on the convolutions'
    shapes (packed weights, 8-256 kernels, 24-1152 terms, 64-25,600 points; 2026-12-06).
    :func:`int_engine`
    checks each form on adversarial operands before handing the engine any work; what
    fails the check, or a missing onnxruntime, leaves the GEMMs to BLAS in float32 (or,
    for the uint8 x int8 kernels alone, to the offset form).  One thread, as the rest
    of the cmodel: parallelism comes from running inferences side by side.
    """

    def __init__(self) -> None:
        import onnxruntime  # noqa: F401  (ImportError: no engine)
        self._session = self._make(None, OFFSET)
        self._full_session = self._make(None, FULL)
        #: whether non-negative patches may go to the uint8 x int8 kernels (set by the
        #: check of :func:`int_engine`)
        self.signed = False
        #: whether those kernels are exact on every uint8 value, so that every GEMM may go
        #: to them (set by the check of :func:`int_engine`)
        self.full_range = False

    @staticmethod
    def _make(right: np.ndarray | None, form: str):
        """A MatMulInteger session of ``form``, ``right`` its constant right operand (which
        onnxruntime packs once) or None for one taken per run: :data:`OFFSET` (both
        operands offset binary, zero points of 128), :data:`SIGNED` (a uint8 left operand,
        an int8 right one, zero points 0) or :data:`FULL` (the same with the left
        operand's zero point 128: an offset-binary left operand)."""
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        right_type = TensorProto.UINT8 if form == OFFSET else TensorProto.INT8
        za = np.array(0 if form == SIGNED else 128, dtype=np.uint8)
        zb = za if form == OFFSET else np.array(0, dtype=np.int8)
        node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
        inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, None)]
        inits = [numpy_helper.from_array(za, "za"), numpy_helper.from_array(zb, "zb")]
        if right is None:
            inputs.append(helper.make_tensor_value_info("b", right_type, None))
        else:
            inits.append(numpy_helper.from_array(right, "b"))
        graph = helper.make_graph(
            [node], "int8_gemm", inputs,
            [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                  ir_version=8)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        _register_arena(ort)
        opts.add_session_config_entry("session.use_env_allocators", "1")
        return ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])

    def packed(self, weights: np.ndarray) -> PackedWeights:
        """int8 ``weights`` [K, R] held as the constant right operand of their own sessions
        (see :class:`PackedWeights`)."""
        return PackedWeights(self, weights)

    def run(self, weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
        """int32 ``weights @ patches`` of offset-binary ``weights`` [..., K, R] and
        ``patches`` [..., R, N] (uint8 ``x + 128``)."""
        return self._session.run(["y"], {"a": weights, "b": patches})[0]

    def run_full_range(self, weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
        """int32 ``weights @ patches`` of offset-binary ``weights`` [..., K, R] (uint8 ``w +
        128``, :attr:`Weights.offset`) and int8 ``patches`` [..., R, N] on the uint8 x int8
        kernels.  Exact where :attr:`full_range` holds."""
        return self._full_session.run(["y"], {"a": weights, "b": patches})[0]

    def exact(self) -> bool:
        """The engine's sums equal int64 ones on operands at the extremes (every product
        +-2**14 or 127 * 127, whole rows of one sign) in shapes of one row, one column,
        odd and long reductions; sets :attr:`signed` when the uint8 x int8 kernels are
        exact on non-negative patches (127 or 0) against weights of -128 and 127, and
        :attr:`full_range` when they are exact on every uint8 value in both forms that
        use it (:meth:`run_full_range`, :meth:`PackedWeights.run` of offset patches)."""
        signed = full = True
        for m, r, n in ((1, 1, 1), (1, 2, 1), (1, 1031, 3), (3, 5, 7), (16, 64, 300),
                        (64, 2051, 64), (9, INT_ENGINE_MAX_TERMS, 2)):
            for wv, pv in ((127, 127), (127, -128), (-128, -128), (-128, 127)):
                w = np.full((m, r), wv, dtype=np.int8)
                p = np.full((r, n), pv, dtype=np.int8)
                p[r // 2:, n // 2:] = 127 if pv == -128 else -128    # mixed signs too
                want = w.astype(np.int64) @ p.astype(np.int64)
                got = self.run(to_offset_binary(w), to_offset_binary(p))
                if not np.array_equal(got, want):
                    return False
                packed = self.packed(w)
                rows = packed.run(np.ascontiguousarray(p.T))   # packed weights
                if not np.array_equal(rows, want.T):
                    return False
                if signed:
                    q = np.where(p < 0, 0, 127).astype(np.int8)
                    rows = packed.run(np.ascontiguousarray(q.T), signed=True)
                    signed = np.array_equal(rows, (w.astype(np.int64) @ q.astype(np.int64)).T)
                if full:
                    full = (np.array_equal(self.run_full_range(to_offset_binary(w), p), want)
                            and np.array_equal(packed.run_full_range(
                                to_offset_binary(np.ascontiguousarray(p.T))), want.T))
        self.signed, self.full_range = signed, full
        return True


_ENGINE: list[IntEngine | None] = []
_ARENA: list[bool] = []


def _register_arena(ort) -> None:
    """Give onnxruntime's environment, once per process, the CPU memory arena that every
    session of the integer engine allocates from (``session.use_env_allocators``).

    A session's own arena grows to its largest output and keeps it: one per layer's
    packed weights took 30 MiB for yolox_nano.  Without an arena, each output is a
    malloc of its own, and those of every layer, interleaved with numpy's, left free
    holes in the C heap that grew it by 4 to 15 MiB over yolox_nano's first 50
    inferences, differently from process to process.  One shared arena, extended by what
    a request lacks (not doubled), is reused by every layer's outputs.  Sessions of
    other code do not use it unless they ask for the environment's allocators too."""
    if _ARENA:
        return
    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                             ort.OrtMemType.DEFAULT)
    same_as_requested = 1           # onnxruntime's ArenaExtendStrategy::kSameAsRequested
    ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, same_as_requested, -1, -1))
    _ARENA.append(True)


def int_engine() -> IntEngine | None:
    """The integer GEMM engine, made and checked on first use; None when onnxruntime
    is missing or its sums are not exact on this machine."""
    if not _ENGINE:
        try:
            engine: IntEngine | None = IntEngine()
        except ImportError:
            engine = None
        if engine is not None and not engine.exact():
            engine = None
        _ENGINE.append(engine)
    return _ENGINE[0]


def gemm_sums(weights: Weights | np.ndarray, patches: np.ndarray, scratch: bool = False
              ) -> np.ndarray:
    """Exact ``weights[..., K, R] @ patches[..., R, N]`` of int8 values; leading dimensions
    broadcast as in :func:`numpy.matmul` (a batch of convolutions).  ``scratch``: the caller
    has no further use for ``patches``, which may then be overwritten (the integer
    engine's operand made in place instead of a copy as large).

    Large GEMMs of int8 patches go to the integer engine (:func:`int_engine`, int32
    sums).  The others are float32 GEMMs over chunks of :data:`EXACT_F32_TERMS`
    reduction terms: every partial sum of a chunk, in whatever order BLAS adds, is
    an integer of at most 2**24 and so exact in float32; float32 sums when ``R`` fits
    one chunk, else the chunks' sums added in int64.
    """
    if not isinstance(weights, Weights):
        weights = Weights(weights)
    r = weights.shape[-1]
    if patches.dtype == np.int8 and patches.ndim == 2 and weights.selection is not None:
        return select_sums(weights.selection, patches, weights.shape[0], 0)
    if (patches.dtype == np.int8 and r <= INT_ENGINE_MAX_TERMS
            and weights.int8[..., 0].size * patches.size >= INT_ENGINE_MIN_MACS):
        engine = int_engine()
        if engine is not None and engine.full_range:
            return engine.run_full_range(weights.offset, patches)
        if engine is not None:
            if scratch and patches.flags.writeable:
                offset = patches.view(np.uint8)
                np.bitwise_xor(offset, np.uint8(0x80), out=offset)    # to_offset_binary
            else:
                offset = to_offset_binary(patches)
            return engine.run(weights.offset, offset)
    w = weights.float32
    p = patches if patches.dtype == np.float32 else patches.astype(np.float32)
    if r <= EXACT_F32_TERMS:
        return w @ p
    out = None
    for r0 in range(0, r, EXACT_F32_TERMS):
        part = (w[..., r0:r0 + EXACT_F32_TERMS] @ p[..., r0:r0 + EXACT_F32_TERMS, :]
                ).astype(np.int64)
        out = part if out is None else np.add(out, part, out=out)
    return out


class PackedWeights:
    """Weights ``[K, R]`` held by sessions of the integer engine as the constant right
    operand of ``patches @ weights.T``: onnxruntime packs them once, where a weight
    matrix taken per run is packed on every GEMM.  One session per operand form
    (:data:`OFFSET`, :data:`SIGNED`, :data:`FULL`), each made on first use."""

    def __init__(self, engine: IntEngine, weights: np.ndarray) -> None:
        self._engine, self._weights = engine, weights
        self._sessions: dict[str, object] = {}
        self.shape = weights.shape

    def _session(self, form: str):
        session = self._sessions.get(form)
        if session is None:
            w = to_offset_binary(self._weights) if form == OFFSET else self._weights
            session = self._sessions[form] = self._engine._make(np.ascontiguousarray(w.T),
                                                                form)
        return session

    def run(self, patches: np.ndarray, signed: bool = False) -> np.ndarray:
        """int32 ``[N, K]``: ``patches @ weights.T`` of ``patches`` [N, R]: int8 or offset
        binary (uint8 ``v + 128``); ``signed``: int8 values known to be non-negative (or
        their bytes as uint8), which go to the faster uint8 x int8 kernels as they are."""
        if signed:
            return self._session(SIGNED).run(["y"], {"a": patches.view(np.uint8)})[0]
        if patches.dtype != np.uint8:
            patches = to_offset_binary(patches)
        if self._engine.full_range:
            return self.run_full_range(patches)
        return self._session(OFFSET).run(["y"], {"a": patches})[0]

    def run_full_range(self, patches: np.ndarray) -> np.ndarray:
        """:meth:`run` of offset-binary ``patches`` on the uint8 x int8 kernels, their zero
        point of 128 taken back by the kernels (exact where the engine's
        :attr:`~IntEngine.full_range` holds)."""
        return self._session(FULL).run(["y"], {"a": patches})[0]


def gemm_int8(weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """:func:`gemm_sums` as int64."""
    sums = gemm_sums(weights, patches)
    return sums if sums.dtype == np.int64 else sums.astype(np.int64)

