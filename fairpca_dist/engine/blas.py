"""BLAS for the row kernels: one thread while row blocks are processed, and an in-place syrk.

One thread: many small products (a p × b block times
a b × D one), which a multi-threaded BLAS only slows down: its threads spin and, on a shared
machine, wait for cores (a 50 × 327 by 327 × 100 product per block: 14 s against 0.26 s for
200k rows on 2 busy cores). Dask workers run with one BLAS thread already; this covers the
threaded scheduler and the in-memory passes."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
from collections.abc import Callable, Iterator

import numpy as np
from scipy.linalg import cython_blas
from threadpoolctl import ThreadpoolController

from fairpca_dist.exceptions import InputError

__all__ = ["one_blas_thread", "add_gram", "symmetrized"]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """While inside, the BLAS libraries loaded in this process use one thread."""
    with _controller_after_imports(len(sys.modules)).limit(limits=1, user_api="blas"):
        yield


@functools.lru_cache(maxsize=1)
def _controller_after_imports(n_modules: int) -> ThreadpoolController:
    """The BLAS libraries loaded in this process. Scanning the loaded shared objects costs
    ~5 ms, which every pass would otherwise pay, so the scan is redone only after modules were
    imported (an import is what loads another BLAS; one loaded by hand with ``ctypes`` is not
    seen until the next import — numpy's own BLAS is always in the scan)."""
    return ThreadpoolController()


# The Fortran BLAS of SciPy, reached through its Cython API (``scipy.linalg.cython_blas``): a
# ctypes call releases the GIL for the whole product, and the result accumulates in place.
# NumPy's ``b.T @ b`` also runs syrk without the GIL, but allocates a p × p result and copies
# its triangle each call (at p = 2000 and 256-row blocks, as long as the product itself), and
# SciPy's f2py wrapper ``scipy.linalg.blas.dsyrk`` holds the GIL (0.96x on 2 threads).
_POINTER = ctypes.c_void_p
_UPPER = ctypes.c_char(b"U")
_NO_TRANSPOSE = ctypes.c_char(b"N")
_ONE = ctypes.c_double(1.0)
_INT32_MAX = 2**31 - 1


@functools.lru_cache(maxsize=1)
def _fortran_dsyrk() -> Callable[..., None]:
    """SciPy's ``dsyrk`` (uplo, trans, n, k, alpha, a, lda, beta, c, ldc; all by reference)."""
    capsule = cython_blas.__pyx_capi__["dsyrk"]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    pointer = ctypes.pythonapi.PyCapsule_GetPointer
    pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.CFUNCTYPE(None, *[_POINTER] * 10)(pointer(capsule, name(capsule)))


def add_gram(block: np.ndarray, gram: np.ndarray) -> None:
    """``gram += blockᵀ block`` on the lower triangle of ``gram`` only (BLAS dsyrk, half the flops
    of a general product), in place and without the GIL.

    Parameters
    ----------
    block : ndarray of shape (m, p), float64
        Rows whose elements are contiguous (unit column stride), e.g. a row slice of a C-ordered
        array; m and the row stride below 2³¹.
    gram : ndarray of shape (p, p), float64, C-ordered
        The accumulator; its strict upper triangle is left untouched (read the result with
        :func:`symmetrized`).
    """
    rows, p = block.shape
    if rows == 0 or p == 0:
        return
    stride = block.strides[0] // 8 if rows > 1 else p
    if block.dtype != np.float64 or block.strides[1] != 8 or stride < p or max(rows, stride) > _INT32_MAX:
        raise InputError(f"add_gram needs float64 rows with contiguous elements, got {block.dtype} {block.strides}")
    if gram.shape != (p, p) or gram.dtype != np.float64 or not gram.flags.c_contiguous or not gram.flags.writeable:
        raise InputError(f"add_gram needs a writeable C-ordered float64 ({p}, {p}) accumulator")
    # Row-major (m, p) rows with row stride `stride` are the column-major p × m matrix A with
    # leading dimension `stride`; dsyrk("U", "N") adds A Aᵀ = blockᵀ block to the column-major
    # upper triangle of C, which is the row-major lower triangle of `gram`.
    n, k, lda = ctypes.c_int(p), ctypes.c_int(rows), ctypes.c_int(stride)
    _fortran_dsyrk()(
        ctypes.byref(_UPPER),
        ctypes.byref(_NO_TRANSPOSE),
        ctypes.byref(n),
        ctypes.byref(k),
        ctypes.byref(_ONE),
        block.ctypes.data,
        ctypes.byref(lda),
        ctypes.byref(_ONE),
        gram.ctypes.data,
        ctypes.byref(n),
    )


def symmetrized(lower: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle is that of ``lower`` (upper triangle ignored)."""
    out = np.tril(lower)
    out += np.tril(lower, -1).T
    return out
