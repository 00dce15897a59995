"""The AVX-512 VNNI byte dot product (``vpdpbusd``) for the int8 scan, where the target CPU has it.

LLVM does not turn the portable int8 loop into ``vpdpbusd`` (it widens to int16 pairs and uses
``vpmaddwd``), so :func:`dpbusd_dot` emits the instruction through its LLVM intrinsic: 64 byte
products per instruction, four times the portable loop's. It multiplies unsigned by signed bytes;
the caller flips the sign bit of the document codes (``c ^ 0x80 = c + 128`` as an unsigned byte)
and subtracts ``128 Σ q``, so the integer result is exactly ``c · q``.

:data:`HAS_VNNI` is False unless Numba compiles for a CPU with ``avx512f``, ``avx512bw`` and
``avx512vnni`` (the host, or ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` naming them), and under
``NUMBA_DISABLE_JIT``; the kernels then use the portable loop. Numba's on-disk cache is keyed by
the CPU name and features, so a cache compiled here is not loaded on a CPU without them.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, config, types
from numba.extending import intrinsic


def _target_has_vnni() -> bool:
    if config.DISABLE_JIT:
        return False
    features = config.CPU_FEATURES
    if features is None:
        if config.CPU_NAME not in (None, "host"):  # a named target without a feature list
            return False
        import llvmlite.binding as ll

        features = ll.get_host_cpu_features().flatten()
    flags = set(str(features).split(","))
    return {"+avx512f", "+avx512bw", "+avx512vnni"} <= flags


#: Whether the int8 scan uses :func:`dpbusd_dot`.
HAS_VNNI = _target_has_vnni()


def _no_dpbusd(a, b, n64) -> int:  # pragma: no cover - never called: HAS_VNNI is False then
    raise NotImplementedError("vpdpbusd needs the JIT and an AVX-512 VNNI CPU")


@intrinsic
def _dpbusd_dot(typingctx, a, b, n64):  # pragma: no cover - compiled into the kernels
    """Σ over the first 64·n64 bytes of ``(a ^ 0x80) as uint8 × b as int8``, int32 (wrapping).

    ``a``, ``b``: C-contiguous 1-D int8 arrays of at least 64·n64 items. One ``vpdpbusd`` per 64
    bytes into 16 int32 lanes, then a horizontal add. Exact while 64·n64·255·127 < 2³¹.
    """
    if not (isinstance(a, types.Array) and isinstance(b, types.Array) and a.ndim == 1 and b.ndim == 1
            and a.dtype == types.int8 and b.dtype == types.int8 and a.layout == "C" and b.layout == "C"
            and isinstance(n64, types.Integer)):
        return None
    sig = types.int32(a, b, n64)

    def codegen(context, builder, signature, args):
        arr_a = context.make_array(signature.args[0])(context, builder, args[0])
        arr_b = context.make_array(signature.args[1])(context, builder, args[1])
        i8p = ir.IntType(8).as_pointer()
        pa = builder.bitcast(arr_a.data, i8p)
        pb = builder.bitcast(arr_b.data, i8p)
        v64 = ir.VectorType(ir.IntType(8), 64)
        v16 = ir.VectorType(ir.IntType(32), 16)
        dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]),
                                            "llvm.x86.avx512.vpdpbusd.512")
        acc = cgutils.alloca_once_value(builder, ir.Constant(v16, [0] * 16))
        flip = ir.Constant(v64, [0x80] * 64)
        with cgutils.for_range(builder, args[2]) as loop:
            off = builder.mul(loop.index, ir.Constant(loop.index.type, 64))
            x = builder.load(builder.bitcast(builder.gep(pa, [off]), v64.as_pointer()), align=1)
            y = builder.load(builder.bitcast(builder.gep(pb, [off]), v64.as_pointer()), align=1)
            x = builder.xor(x, flip)
            dot = builder.call(dp, [builder.load(acc), builder.bitcast(x, v16), builder.bitcast(y, v16)])
            builder.store(dot, acc)
        reduce_add = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [v16]),
                                                    "llvm.vector.reduce.add.v16i32")
        return builder.call(reduce_add, [builder.load(acc)])

    return sig, codegen


dpbusd_dot = _dpbusd_dot if HAS_VNNI else _no_dpbusd
