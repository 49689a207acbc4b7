"""cuSPARSE's CSR SpMM (``cusparseSpMM``) through CuPy's low-level bindings: the vendor library beside
jaxgraphops and XLA in the GPU check's timing step (``benchmarks.gpu_check``, tools/gpu_check.sh).

``out = A @ x``: ``A`` is the graph's CSC view read as a CSR matrix over destination rows (row ``i`` holds the
in-edges of node ``i``; values the edge weights in that order, ones for ``copy_u``), ``x [n_src, F]`` and
``out [n_dst, F]`` float32, 32-bit indices. The dense matrices are row-major, as JAX holds them, unless
cuSPARSE refuses that layout for the algorithm: then column-major (``layout`` says which). Algorithms
(``ALGORITHMS``): ``"alg3"``, ``CUSPARSE_SPMM_CSR_ALG3``, the one cuSPARSE documents as giving the same bits on
every run (opA = N), and ``"default"``, ``CUSPARSE_SPMM_ALG_DEFAULT``. CuPy's bindings have no
``cusparseSpMM_preprocess``: ALG3 runs without it. Needs a GPU and CuPy (``cupy-cuda13x``); elsewhere the
constructor raises ``ImportError`` or CuPy's CUDA error, which the caller records.

Example (on a GPU)::

    spmm = CsrSpmm(g.csc_offsets, g.csc_src, w[g.csc_eid], g.n_src, x, "alg3")
    out = spmm.output()  # NumPy [n_dst, F]
"""

from __future__ import annotations

import numpy as np

ALGORITHMS = {"default": 0, "alg3": 12}  # cusparseSpMMAlg_t: CUSPARSE_SPMM_ALG_DEFAULT, CUSPARSE_SPMM_CSR_ALG3


class CsrSpmm:
    """One prepared ``cusparseSpMM``: descriptors, workspace and output allocated once; ``run()`` enqueues the
    product on CuPy's current stream, ``sync()`` waits for it, ``output()`` runs it and returns NumPy."""

    def __init__(self, offsets, cols, values, n_cols: int, x, algorithm: str):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"CsrSpmm: algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
        try:
            self._prepare(offsets, cols, values, n_cols, x, algorithm, "row")
        except Exception as e:  # CuSparseError: CUSPARSE_STATUS_NOT_SUPPORTED for this layout
            if type(e).__name__ != "CuSparseError":
                raise
            self._prepare(offsets, cols, values, n_cols, x, algorithm, "col")

    def _prepare(self, offsets, cols, values, n_cols, x, algorithm, layout):
        import cupy as cp
        from cupy.cuda import device, runtime
        from cupy_backends.cuda.libs import cusparse as cs

        self._cp, self._cs = cp, cs
        self.offsets = cp.asarray(np.asarray(offsets, np.int32))
        self.cols = cp.asarray(np.asarray(cols, np.int32))
        self.values = cp.asarray(np.asarray(values, np.float32))
        order = "C" if layout == "row" else "F"
        self.x = cp.asarray(np.asarray(x, np.float32), order=order)
        n_rows, nnz, width = len(self.offsets) - 1, len(self.cols), self.x.shape[1]
        if self.x.shape[0] != n_cols or len(self.values) != nnz:
            raise ValueError(f"CsrSpmm: x has {self.x.shape[0]} rows for {n_cols} columns, or {len(self.values)} "
                             f"values for {nnz} column indices")
        self.out = cp.empty((n_rows, width), cp.float32, order=order)
        f32 = runtime.CUDA_R_32F
        dense = (cs.CUSPARSE_ORDER_ROW, width, width) if layout == "row" else (cs.CUSPARSE_ORDER_COL, n_cols, n_rows)
        self._handle = device.get_cusparse_handle()
        self._a = cs.createCsr(n_rows, n_cols, nnz, self.offsets.data.ptr, self.cols.data.ptr, self.values.data.ptr,
                               cs.CUSPARSE_INDEX_32I, cs.CUSPARSE_INDEX_32I, cs.CUSPARSE_INDEX_BASE_ZERO, f32)
        self._b = cs.createDnMat(n_cols, width, dense[1], self.x.data.ptr, f32, dense[0])
        self._c = cs.createDnMat(n_rows, width, dense[2], self.out.data.ptr, f32, dense[0])
        self._alpha, self._beta = np.ones(1, np.float32), np.zeros(1, np.float32)
        op = cs.CUSPARSE_OPERATION_NON_TRANSPOSE
        self._args = (self._handle, op, op, self._alpha.ctypes.data, self._a, self._b, self._beta.ctypes.data,
                      self._c, f32, ALGORITHMS[algorithm])
        self._workspace = cp.empty(cs.spMM_bufferSize(*self._args), cp.int8)
        self.layout, self.version = layout, cs.getVersion(self._handle)

    def run(self):
        self._cs.spMM(*self._args, self._workspace.data.ptr)
        return self.out

    def sync(self, result=None):
        self._cp.cuda.get_current_stream().synchronize()
        return result

    def output(self) -> np.ndarray:
        return np.ascontiguousarray(self._cp.asnumpy(self.sync(self.run())))

    def close(self):
        self._cs.destroySpMat(self._a)
        self._cs.destroyDnMat(self._b)
        self._cs.destroyDnMat(self._c)
