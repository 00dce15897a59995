"""Software prefetch hints for Numba kernels (LLVM ``llvm.prefetch``, read): into every cache
level (:data:`prefetch`, locality 3) or into L2 and beyond (:data:`prefetch_l2`, locality 2)."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, config, types
from numba.extending import intrinsic


def _no_prefetch(arr, idx) -> None:  # pragma: no cover - trivial
    """Pure-Python stand-in under ``NUMBA_DISABLE_JIT`` (a hint has no effect on results)."""


def _prefetch_intrinsic(locality: int):  # pragma: no cover - compiled into the kernels
    @intrinsic
    def _prefetch(typingctx, arr, idx):
        """Hint the CPU to load the cache line holding ``arr[idx]``; no effect on results."""
        if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
            return None
        sig = types.void(arr, idx)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [args[1]])
            i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
            builder.call(fn, [i8p, i32(0), i32(locality), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    return _prefetch


#: Where a kernel's next reads are random and known in advance (the lexical scorer's candidate
#: term lists), so their cache misses overlap instead of arriving one by one.
prefetch = _no_prefetch if config.DISABLE_JIT else _prefetch_intrinsic(3)
#: The same into L2 (``prefetcht1``), for whole rows fetched a few steps ahead (the int8 scan's
#: re-scoring), where L1-level hints measured no faster and L2-level ones about 25 % faster.
prefetch_l2 = _no_prefetch if config.DISABLE_JIT else _prefetch_intrinsic(2)
