"""Area resize of uint8 images, byte for byte OpenCV's ``cv2.resize(..., INTER_AREA)``.

``AreaResize(src_height, src_width, dst_height, dst_width, channels)`` builds
OpenCV's tables once; ``resize(src, dst)`` writes ``dst`` in place and
``pool_resize(a, b, dst)`` resizes ``np.maximum(a, b)`` without materialising it
(the per-pixel max is taken while the source rows are read).  Downscales only,
by the two paths OpenCV (4.x and 5.x, ``modules/imgproc/src/resize.cpp``) takes:

- an integer factor in both axes (``is_area_fast``: ``1/(dst/src)`` within
  DBL_EPSILON of an integer; ``resizeAreaFast``): the integer sum of each
  ``ky x kx`` cell, then ``(sum + 2) >> 2`` for 2x2 with 1, 3 or 4 channels (its
  SIMD loop and its scalar tail both round half up), else
  ``saturate_cast<uchar>(sum * (1.f / area))``.  The sums are exact integers, so
  here the rows of a cell are summed first;
- any other downscale (``computeResizeAreaTab`` + ``ResizeArea_Invoker``): per
  source row a float32 row ``buf[dx] = ((0 + s0*a0) + s1*a1) + ...`` in table
  order, then per destination row ``sum = b0*buf0; sum += b1*buf1; ...`` and
  ``saturate_cast<uchar>(sum)`` (round half to even, saturate to [0, 255]).

In the second path every float32 operation is OpenCV's, in OpenCV's order, so
the bytes are the same; only the schedule differs.  The horizontal pass runs
on 8 source rows at once: a strip of 8 rows is transposed to floats
(``strip[sx*8 + l]``), so each tap of a destination column is two plain 4-float
loads, no gathers, and every source row is summed once (OpenCV's ``buf`` of a
row that straddles two destination rows is the same for both).  Each column's
taps are padded to a fixed count with weight ``+0.0``: adding ``+0.0`` to a
non-negative float changes nothing.  4x4 transposes put the sums back in row
order for the vertical pass, 16 destination bytes at a time.

Upscales (OpenCV's ``INTER_AREA`` is bilinear there), more than 4 channels,
integer cells so large that OpenCV's ``int`` sum overflows, and builds whose
float32 arithmetic has excess precision (x87) are refused with ``ValueError``:
the caller keeps ``cv2.resize`` for those.

``a*b + c`` must not become a fused multiply-add (rounded once, not twice):
x86-64 without ``-march`` has no FMA, but ``FASTVEC_NATIVE=1`` builds (and
aarch64) have it and GCC contracts by default; with contraction on, a
``-march=native`` build differs from OpenCV in a few pixels per frame.  So it
is switched off below for this module.  The vector helpers (``SIMD``) are SSE2
where the target has it (x86-64), GCC/Clang vector extensions elsewhere (NEON
on aarch64), else plain C; all compute the same float32 operations.
"""

from libc.math cimport ceil, floor, lrint
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

cimport numpy as cnp

cnp.import_array()

cdef extern from "area_simd.h":
    ctypedef struct fv_f4:
        pass
    const char* FV_SIMD_NAME
    int FV_EXACT
    fv_f4 fv_load(const float* p) noexcept nogil
    void fv_store(float* p, fv_f4 v) noexcept nogil
    fv_f4 fv_set1(float x) noexcept nogil
    fv_f4 fv_mul(fv_f4 a, fv_f4 b) noexcept nogil
    fv_f4 fv_add(fv_f4 a, fv_f4 b) noexcept nogil
    void fv_store_t4(float* out, Py_ssize_t stride, fv_f4 c0, fv_f4 c1, fv_f4 c2,
                     fv_f4 c3) noexcept nogil
    void fv_strip16(const uint8_t* const* a, const uint8_t* const* b, int sx,
                    float* out, int step) noexcept nogil
    void fv_round16(fv_f4 v0, fv_f4 v1, fv_f4 v2, fv_f4 v3, uint8_t* out) noexcept nogil
    uint8_t fv_round_u8(float x) noexcept nogil
    int fv_2x2(const uint8_t* a0, const uint8_t* a1, const uint8_t* b0, const uint8_t* b1,
               uint8_t* out, int w, int Wc, int cn) noexcept nogil

SIMD = FV_SIMD_NAME.decode()  # the vector helpers built: "sse2", "vector" or "scalar"

cdef enum:
    LANES = 8  # source rows per horizontal pass: two fv_f4
    MODE_AREA = 0  # ResizeArea_Invoker: float tables
    MODE_INT = 1  # resizeAreaFast: integer cell sum * (1.f/area), round half even
    MODE_2X2 = 2  # resizeAreaFast, 2x2 with 1, 3 or 4 channels: (sum + 2) >> 2


cdef inline Py_ssize_t _up(Py_ssize_t n, Py_ssize_t m) noexcept nogil:
    return (n + m - 1) // m * m


cdef inline bint _overlap(const void* x, Py_ssize_t nx, const void* y,
                          Py_ssize_t ny) noexcept nogil:
    return <uintptr_t>x < <uintptr_t>y + ny and <uintptr_t>y < <uintptr_t>x + nx


cdef inline float* _aligned(void* raw) noexcept nogil:
    return <float*>((<uintptr_t>raw + 63) & ~(<uintptr_t>63))


cdef struct Plan:
    int H, W, h, w, cn
    int Wc, wc  # row lengths in elements (width * channels)
    int mode
    # MODE_INT / MODE_2X2
    int kx, ky
    float inv_area
    # MODE_AREA.  Horizontal: per destination element d (column * cn + channel,
    # d < wc4 = wc rounded up to 4) the strip offset of its first source element
    # (element * LANES; OpenCV's entries for a column are consecutive pixels, so tap
    # k reads offset + k * cn * LANES) and `taps` weights, each repeated 4 times (an
    # fv_f4).  Padding taps have weight +0.0 and read past the column, at worst
    # into the strip's zeroed columns past Wc.
    int taps, wc4
    int32_t* xoff
    float* xweight  # aligned, wc4 * taps * 4
    void* xweight_raw
    # Vertical: OpenCV's entries; destination row dy's are [ystart[dy], ystart[dy+1]),
    # each a source row's offset in the row sums and its weight repeated 4 times.
    int32_t* ystart
    Py_ssize_t* yoff
    float* yweight  # aligned
    void* yweight_raw
    # Scratch: the strip (LANES floats per source element, Wc + 4 * taps + 16 of
    # them) and the horizontal sums of every source row (`stride` = wc4 floats each).
    # MODE_INT: strip_floats holds a row of column sums instead.
    Py_ssize_t stride, strip_floats, rows_floats


cdef int _area_table(int ssize, int dsize, double scale, int32_t* di, int32_t* si,
                     float* alpha) noexcept:
    """computeResizeAreaTab(ssize, dsize, cn=1, scale, tab): OpenCV's entries, in order."""
    cdef int k = 0, dx, sx, sx1, sx2
    cdef double fsx1, fsx2, cell
    for dx in range(dsize):
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = min(scale, ssize - fsx1)
        sx1 = <int>ceil(fsx1)
        sx2 = <int>floor(fsx2)
        sx2 = min(sx2, ssize - 1)
        sx1 = min(sx1, sx2)
        if sx1 - fsx1 > 1e-3:
            di[k] = dx
            si[k] = sx1 - 1
            alpha[k] = <float>((sx1 - fsx1) / cell)
            k += 1
        for sx in range(sx1, sx2):
            di[k] = dx
            si[k] = sx
            alpha[k] = <float>(1.0 / cell)
            k += 1
        if fsx2 - sx2 > 1e-3:
            di[k] = dx
            si[k] = sx2
            alpha[k] = <float>(min(min(fsx2 - sx2, 1.0), cell) / cell)
            k += 1
    return k


cdef void _strip(const Plan* p, const uint8_t* a, const uint8_t* b, int r0,
                 float* strip) noexcept nogil:
    """strip[sx*8 + l] = float(row r0 + l of a, or of max(a, b))[sx]; lanes past the
    last row repeat it (their sums are never read)."""
    cdef const uint8_t* ra[LANES]
    cdef const uint8_t* rb[LANES]
    cdef int l, sx = 0, Wc = p.Wc
    cdef uint8_t u, v
    for l in range(LANES):
        ra[l] = a + <Py_ssize_t>min(r0 + l, p.H - 1) * Wc
        rb[l] = (b + <Py_ssize_t>min(r0 + l, p.H - 1) * Wc) if b != NULL else NULL
    while sx + 16 <= Wc:
        if b == NULL:
            fv_strip16(ra, NULL, sx, strip + sx * LANES, LANES)
            fv_strip16(ra + 4, NULL, sx, strip + sx * LANES + 4, LANES)
        else:
            fv_strip16(ra, rb, sx, strip + sx * LANES, LANES)
            fv_strip16(ra + 4, rb + 4, sx, strip + sx * LANES + 4, LANES)
        sx += 16
    for sx in range(sx, Wc):
        for l in range(LANES):
            u = ra[l][sx]
            v = rb[l][sx] if b != NULL else 0
            strip[sx * LANES + l] = u if u > v else v


cdef inline void _column(const float* s, const float* wt, int taps, int step,
                         fv_f4* lo, fv_f4* hi) noexcept nogil:
    """OpenCV's buf[d] of the 8 strip rows, ((s0*a0 + s1*a1) + s2*a2) + ..., where
    tap k reads s + k*step: rows 0-3 in lo, 4-7 in hi."""
    cdef fv_f4 w = fv_load(wt)
    cdef fv_f4 a = fv_mul(fv_load(s), w)
    cdef fv_f4 b = fv_mul(fv_load(s + 4), w)
    cdef int k
    for k in range(1, taps):
        w = fv_load(wt + 4 * k)
        a = fv_add(a, fv_mul(fv_load(s + k * step), w))
        b = fv_add(b, fv_mul(fv_load(s + k * step + 4), w))
    lo[0] = a
    hi[0] = b


cdef inline void _horizontal_n(const Plan* p, const float* strip, float* rows, int taps,
                               int step) noexcept nogil:
    cdef const int32_t* off = p.xoff
    cdef const float* wt = p.xweight
    cdef fv_f4 l0, l1, l2, l3, h0, h1, h2, h3
    cdef Py_ssize_t stride = p.stride
    cdef int d0
    for d0 in range(0, p.wc4, 4):  # destination elements d0 .. d0 + 3
        _column(strip + off[0], wt, taps, step, &l0, &h0)
        _column(strip + off[1], wt + 4 * taps, taps, step, &l1, &h1)
        _column(strip + off[2], wt + 8 * taps, taps, step, &l2, &h2)
        _column(strip + off[3], wt + 12 * taps, taps, step, &l3, &h3)
        fv_store_t4(rows + d0, stride, l0, l1, l2, l3)
        fv_store_t4(rows + 4 * stride + d0, stride, h0, h1, h2, h3)
        off += 4
        wt += 16 * taps


cdef void _horizontal(const Plan* p, const float* strip, float* rows) noexcept nogil:
    """rows[l * stride + d] = OpenCV's buf[d] of strip row l, for the 8 rows at once
    (one channel and the common tap counts as constants, so the tap loop unrolls)."""
    if p.cn == 1 and p.taps == 2:
        _horizontal_n(p, strip, rows, 2, LANES)
    elif p.cn == 1 and p.taps == 3:
        _horizontal_n(p, strip, rows, 3, LANES)
    elif p.cn == 1 and p.taps == 4:
        _horizontal_n(p, strip, rows, 4, LANES)
    else:
        _horizontal_n(p, strip, rows, p.taps, p.cn * LANES)


cdef void _vertical(const Plan* p, const float* rows, uint8_t* dst) noexcept nogil:
    """dst row dy = saturate_cast<uchar>(b0*buf0 + b1*buf1 + ...), in OpenCV's order,
    16 elements at a time."""
    cdef fv_f4 a0, a1, a2, a3, bv
    cdef const float* r
    cdef uint8_t tail[16]
    cdef int dy, j, j0, j1, x, wc = p.wc
    cdef uint8_t* out
    for dy in range(p.h):
        j0 = p.ystart[dy]
        j1 = p.ystart[dy + 1]
        out = dst + <Py_ssize_t>dy * wc
        x = 0
        while x + 16 <= wc:
            r = rows + p.yoff[j0] + x
            bv = fv_load(p.yweight + 4 * j0)
            a0 = fv_mul(bv, fv_load(r))
            a1 = fv_mul(bv, fv_load(r + 4))
            a2 = fv_mul(bv, fv_load(r + 8))
            a3 = fv_mul(bv, fv_load(r + 12))
            for j in range(j0 + 1, j1):
                r = rows + p.yoff[j] + x
                bv = fv_load(p.yweight + 4 * j)
                a0 = fv_add(a0, fv_mul(bv, fv_load(r)))
                a1 = fv_add(a1, fv_mul(bv, fv_load(r + 4)))
                a2 = fv_add(a2, fv_mul(bv, fv_load(r + 8)))
                a3 = fv_add(a3, fv_mul(bv, fv_load(r + 12)))
            fv_round16(a0, a1, a2, a3, out + x)
            x += 16
        while x < wc:  # the last 1 to 15 elements, 4 at a time
            a0 = fv_mul(fv_load(p.yweight + 4 * j0), fv_load(rows + p.yoff[j0] + x))
            for j in range(j0 + 1, j1):
                a0 = fv_add(a0, fv_mul(fv_load(p.yweight + 4 * j), fv_load(rows + p.yoff[j] + x)))
            fv_round16(a0, a0, a0, a0, tail)
            memcpy(out + x, tail, min(4, wc - x))
            x += 4


cdef void _area(const Plan* p, const uint8_t* a, const uint8_t* b, uint8_t* dst,
                float* scratch) noexcept nogil:
    cdef float* strip = scratch
    cdef float* rows = scratch + p.strip_floats
    cdef int r0 = 0
    while r0 < p.H:
        _strip(p, a, b, r0, strip)
        _horizontal(p, strip, rows + r0 * p.stride)
        r0 += LANES
    _vertical(p, rows, dst)


ctypedef fused sum_t:
    uint16_t  # cells of up to 257 rows
    uint32_t


cdef inline void _cell_rows(const Plan* p, const uint8_t* a, const uint8_t* b, int dy,
                            sum_t* sums) noexcept nogil:
    """sums[x] = the column sums of source rows dy*ky .. dy*ky + ky - 1 (of max(a, b)
    when b is given): integer cell sums are exact, so summing rows first is fine."""
    cdef int j, x, Wc = p.Wc
    cdef const uint8_t* ra = a + <Py_ssize_t>dy * p.ky * Wc
    cdef const uint8_t* rb = (b + <Py_ssize_t>dy * p.ky * Wc) if b != NULL else NULL
    cdef uint8_t u, v
    if b == NULL:
        for x in range(Wc):
            sums[x] = ra[x]
        for j in range(1, p.ky):
            ra += Wc
            for x in range(Wc):
                sums[x] = sums[x] + ra[x]
    else:
        for x in range(Wc):
            u = ra[x]
            v = rb[x]
            sums[x] = u if u > v else v
        for j in range(1, p.ky):
            ra += Wc
            rb += Wc
            for x in range(Wc):
                u = ra[x]
                v = rb[x]
                sums[x] = sums[x] + (u if u > v else v)


cdef inline void _cells(const Plan* p, const sum_t* sums, uint8_t* out, int cn,
                        int kx) noexcept nogil:
    """resizeAreaFast: saturate_cast<uchar>(sum * (1.f / area)), round half to even."""
    cdef int dx, c, i
    cdef uint32_t s
    cdef float inv_area = p.inv_area
    for dx in range(p.w):
        for c in range(cn):
            s = 0
            for i in range(kx):
                s = s + sums[(dx * kx + i) * cn + c]
            out[dx * cn + c] = fv_round_u8(<float>s * inv_area)


cdef void _integer(const Plan* p, const uint8_t* a, const uint8_t* b, uint8_t* dst,
                   sum_t* sums) noexcept nogil:
    """resizeAreaFast for uint8 other than 2x2 (one channel and small factors as
    constants, so the loops vectorize)."""
    cdef int dy
    cdef uint8_t* out
    for dy in range(p.h):
        _cell_rows(p, a, b, dy, sums)
        out = dst + <Py_ssize_t>dy * p.wc
        if p.cn == 1 and p.kx == 1:
            _cells(p, sums, out, 1, 1)
        elif p.cn == 1 and p.kx == 2:
            _cells(p, sums, out, 1, 2)
        elif p.cn == 1:
            _cells(p, sums, out, 1, p.kx)
        else:
            _cells(p, sums, out, p.cn, p.kx)


cdef void _two_by_two(const Plan* p, const uint8_t* a, const uint8_t* b,
                      uint8_t* dst) noexcept nogil:
    """resizeAreaFast 2x2 with 1, 3 or 4 channels: (sum + 2) >> 2, as its SIMD loop and
    its scalar tail both compute it."""
    cdef int dy, dx, c, i, cn = p.cn, Wc = p.Wc
    cdef const uint8_t* a0
    cdef const uint8_t* a1
    cdef const uint8_t* b0 = NULL
    cdef const uint8_t* b1 = NULL
    cdef uint8_t* out
    for dy in range(p.h):
        a0 = a + <Py_ssize_t>2 * dy * Wc
        a1 = a0 + Wc
        if b != NULL:
            b0 = b + <Py_ssize_t>2 * dy * Wc
            b1 = b0 + Wc
        out = dst + <Py_ssize_t>dy * p.wc
        dx = fv_2x2(a0, a1, b0, b1, out, p.w, Wc, cn)
        for i in range(dx * cn, p.wc):
            c = (i // cn) * 2 * cn + i % cn
            if b == NULL:
                out[i] = <uint8_t>((a0[c] + a0[c + cn] + a1[c] + a1[c + cn] + 2) >> 2)
            else:
                out[i] = <uint8_t>((max(a0[c], b0[c]) + max(a0[c + cn], b0[c + cn])
                                    + max(a1[c], b1[c]) + max(a1[c + cn], b1[c + cn]) + 2) >> 2)


cdef class AreaResize:
    """OpenCV's ``INTER_AREA`` downscale of uint8 ``(H, W[, C])`` images to ``(h, w[, C])``.

    Raises ``ValueError`` for what it does not reproduce (an upscale in either
    axis, more than 4 channels, an integer cell of 2**31 / 255 pixels or more):
    the caller falls back to ``cv2.resize``.  ``path`` says which of OpenCV's
    paths it follows: ``"area"``, ``"2x2"`` or ``"integer"``.  Calls release the
    GIL; one object may serve several threads (a call that finds the scratch
    memory busy allocates its own).  Scratch memory: about ``4 * H * w * C +
    32 * W * C`` bytes on the ``"area"`` path.
    """

    cdef Plan plan
    cdef void* scratch_raw
    cdef bint busy
    cdef readonly tuple src_shape
    cdef readonly tuple dst_shape
    cdef readonly str path

    def __cinit__(self):
        self.plan.xoff = NULL
        self.plan.xweight_raw = NULL
        self.plan.ystart = NULL
        self.plan.yoff = NULL
        self.plan.yweight_raw = NULL
        self.scratch_raw = NULL

    def __dealloc__(self):
        free(self.plan.xoff)
        free(self.plan.xweight_raw)
        free(self.plan.ystart)
        free(self.plan.yoff)
        free(self.plan.yweight_raw)
        free(self.scratch_raw)

    def __init__(self, int src_height, int src_width, int dst_height, int dst_width,
                 int channels=1):
        cdef Plan* p = &self.plan
        cdef double scale_x, scale_y
        cdef int ix, iy
        if self.path is not None:
            raise TypeError("AreaResize is initialised once")
        if not FV_EXACT:
            raise ValueError("this build evaluates float32 with excess precision "
                             "(FLT_EVAL_METHOD != 0): use cv2.resize")
        if min(src_height, src_width, dst_height, dst_width) < 1:
            raise ValueError(f"expected positive sizes, got {src_height}x{src_width} -> "
                             f"{dst_height}x{dst_width}")
        if not 1 <= channels <= 4:
            raise ValueError(f"expected 1 to 4 channels (OpenCV's area path), got {channels}")
        if dst_height > src_height or dst_width > src_width:
            raise ValueError(
                f"{src_height}x{src_width} -> {dst_height}x{dst_width} enlarges an axis, where "
                f"OpenCV's INTER_AREA is bilinear: use cv2.resize")
        if <long long>src_height * src_width * channels >= 2**28:
            raise ValueError(f"expected an image under 2**28 bytes, got "
                             f"{src_height}x{src_width}x{channels}")
        p.H, p.W, p.h, p.w, p.cn = src_height, src_width, dst_height, dst_width, channels
        p.Wc, p.wc = src_width * channels, dst_width * channels
        if channels == 1:
            self.src_shape, self.dst_shape = (src_height, src_width), (dst_height, dst_width)
        else:
            self.src_shape = (src_height, src_width, channels)
            self.dst_shape = (dst_height, dst_width, channels)
        # cv::resize: inv_scale = (double)dsize / ssize; hal::resize: scale = 1. / inv_scale
        scale_x = 1.0 / (<double>dst_width / src_width)
        scale_y = 1.0 / (<double>dst_height / src_height)
        ix = <int>lrint(scale_x)  # saturate_cast<int>(double)
        iy = <int>lrint(scale_y)
        if abs(scale_x - ix) < 2.220446049250313e-16 and abs(scale_y - iy) < 2.220446049250313e-16:
            if <long long>ix * iy * 255 >= 2**31:
                raise ValueError(f"a {iy}x{ix} cell sums past 2**31: OpenCV's int sum "
                                 f"overflows there, use cv2.resize")
            p.kx, p.ky = ix, iy  # is_area_fast (DBL_EPSILON)
            p.inv_area = 1.0 / <float>(ix * iy)
            p.mode = MODE_2X2 if (ix == 2 and iy == 2 and channels != 2) else MODE_INT
            p.strip_floats = p.Wc + 16  # the column sums (uint16 or uint32)
            p.rows_floats = 0
            self.scratch_raw = self._alloc_scratch()
            if self.scratch_raw == NULL:
                raise MemoryError()
            self.path = "2x2" if p.mode == MODE_2X2 else "integer"
            return
        p.mode = MODE_AREA
        p.stride = _up(p.wc, 4)
        self._tables(scale_x, scale_y)
        p.strip_floats = (_up(p.Wc, 16) + 4 * p.taps + 16) * LANES
        p.rows_floats = _up(p.H, LANES) * p.stride
        self.scratch_raw = self._alloc_scratch()
        if self.scratch_raw == NULL:
            raise MemoryError()
        self.path = "area"

    cdef int _tables(self, double scale_x, double scale_y) except -1:
        cdef Plan* p = &self.plan
        cdef Py_ssize_t cap = 2 * max(p.W, p.H) + 4
        cdef int32_t* di = <int32_t*>malloc(sizeof(int32_t) * cap)
        cdef int32_t* si = <int32_t*>malloc(sizeof(int32_t) * cap)
        cdef float* al = <float*>malloc(sizeof(float) * cap)
        cdef int n, k, dx, c, t, first, taps, l
        cdef Py_ssize_t d
        cdef float wt
        try:
            if di == NULL or si == NULL or al == NULL:
                raise MemoryError()
            # horizontal: each destination column's entries, padded to `taps`
            n = _area_table(p.W, p.w, scale_x, di, si, al)
            taps = k = 0
            while k < n:
                first = k
                while k < n and di[k] == di[first]:
                    k += 1
                taps = max(taps, k - first)
            p.taps = taps
            p.wc4 = <int>_up(p.wc, 4)
            p.xoff = <int32_t*>calloc(p.wc4, sizeof(int32_t))
            p.xweight_raw = calloc(<size_t>p.wc4 * taps * 4 + 16, sizeof(float))
            if p.xoff == NULL or p.xweight_raw == NULL:
                raise MemoryError()
            p.xweight = _aligned(p.xweight_raw)
            k = 0
            for dx in range(p.w):
                first = k
                while k < n and di[k] == dx:
                    if k > first and si[k] != si[k - 1] + 1:
                        raise ValueError(f"source columns of destination column {dx} are not "
                                         f"consecutive")
                    k += 1
                if k == first:
                    raise ValueError(f"no source column for destination column {dx}")
                for c in range(p.cn):
                    d = <Py_ssize_t>dx * p.cn + c
                    p.xoff[d] = (si[first] * p.cn + c) * LANES  # < 2**31: Wc < 2**28
                    for t in range(taps):  # padding: weight +0.0
                        wt = al[first + t] if first + t < k else 0.0
                        for l in range(4):  # one fv_f4 of it
                            p.xweight[(d * taps + t) * 4 + l] = wt
            # (elements wc .. wc4 - 1: offset 0, weights 0, from calloc)
            # vertical: OpenCV's entries as they are
            n = _area_table(p.H, p.h, scale_y, di, si, al)
            p.ystart = <int32_t*>malloc(sizeof(int32_t) * (p.h + 1))
            p.yoff = <Py_ssize_t*>malloc(sizeof(Py_ssize_t) * n)
            p.yweight_raw = malloc(sizeof(float) * (4 * <size_t>n + 16))
            if p.ystart == NULL or p.yoff == NULL or p.yweight_raw == NULL:
                raise MemoryError()
            p.yweight = _aligned(p.yweight_raw)
            k = 0
            for dx in range(p.h):
                p.ystart[dx] = k
                first = k
                while k < n and di[k] == dx:
                    p.yoff[k] = si[k] * p.stride
                    for l in range(4):
                        p.yweight[4 * k + l] = al[k]
                    k += 1
                if k == first:
                    raise ValueError(f"no source row for destination row {dx}")
            p.ystart[p.h] = k
        finally:
            free(di)
            free(si)
            free(al)
        return 0

    cdef void* _alloc_scratch(self) noexcept:
        return calloc(self.plan.strip_floats + self.plan.rows_floats + 16, sizeof(float))

    cdef int _check(self, object array, bint is_src, str name, bint write) except -1:
        cdef cnp.ndarray arr
        cdef tuple shape
        if not cnp.PyArray_Check(array):
            raise TypeError(f"expected {name} to be a numpy array, got {type(array).__name__}")
        arr = <cnp.ndarray>array
        if (cnp.PyArray_TYPE(arr) == cnp.NPY_UINT8 and cnp.PyArray_IS_C_CONTIGUOUS(arr)
                and (not write or cnp.PyArray_ISWRITEABLE(arr)) and self._shape_ok(arr, is_src)):
            return 0
        shape = self.src_shape if is_src else self.dst_shape
        raise ValueError(
            f"expected {name} to be a {'writeable ' if write else ''}C-contiguous uint8 array "
            f"of shape {shape}{' or ' + str(shape + (1,)) if len(shape) == 2 else ''}, got "
            f"{arr.dtype} {(<object>arr).shape}"
            f"{'' if cnp.PyArray_IS_C_CONTIGUOUS(arr) else ', not C-contiguous'}"
            f"{', read-only' if write and not cnp.PyArray_ISWRITEABLE(arr) else ''}")

    cdef bint _shape_ok(self, cnp.ndarray arr, bint is_src) noexcept:
        cdef int ndim = cnp.PyArray_NDIM(arr)
        cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(arr)
        cdef Py_ssize_t rows = self.plan.H if is_src else self.plan.h
        cdef Py_ssize_t cols = self.plan.W if is_src else self.plan.w
        if ndim == 2:
            return self.plan.cn == 1 and dims[0] == rows and dims[1] == cols
        return ndim == 3 and dims[0] == rows and dims[1] == cols and dims[2] == self.plan.cn

    cdef int _run(self, object src, object other, object dst) except -1:
        cdef const uint8_t* a
        cdef const uint8_t* b = NULL
        cdef uint8_t* d
        cdef void* raw
        cdef bint own = False
        cdef Py_ssize_t n_src = <Py_ssize_t>self.plan.H * self.plan.Wc
        cdef Py_ssize_t n_dst = <Py_ssize_t>self.plan.h * self.plan.wc
        if self.path is None:
            raise ValueError("AreaResize was not initialised")
        self._check(src, True, "a" if other is not None else "src", False)
        if other is not None:
            self._check(other, True, "b", False)
            b = <const uint8_t*>cnp.PyArray_DATA(<cnp.ndarray>other)
        self._check(dst, False, "dst", True)
        a = <const uint8_t*>cnp.PyArray_DATA(<cnp.ndarray>src)
        d = <uint8_t*>cnp.PyArray_DATA(<cnp.ndarray>dst)
        if _overlap(d, n_dst, a, n_src) or (b != NULL and _overlap(d, n_dst, b, n_src)):
            raise ValueError("expected dst not to overlap the source image(s)")
        raw = self.scratch_raw
        if self.busy:  # another thread is inside a call on this object
            raw = self._alloc_scratch()
            if raw == NULL:
                raise MemoryError()
            own = True
        else:
            self.busy = True
        try:
            with nogil:
                if self.plan.mode == MODE_AREA:
                    _area(&self.plan, a, b, d, _aligned(raw))
                elif self.plan.mode == MODE_2X2:
                    _two_by_two(&self.plan, a, b, d)
                elif self.plan.ky <= 257:  # 257 * 255 < 2**16
                    _integer(&self.plan, a, b, d, <uint16_t*>_aligned(raw))
                else:
                    _integer(&self.plan, a, b, d, <uint32_t*>_aligned(raw))
        finally:
            if own:
                free(raw)
            else:
                self.busy = False
        return 0

    def __reduce__(self):
        cdef const Plan* p = &self.plan
        return type(self), (p.H, p.W, p.h, p.w, p.cn)

    def resize(self, src, dst):
        """``dst[...] = cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA)``.

        ``src``: C-contiguous uint8 of ``src_shape``; ``dst``: writeable
        C-contiguous uint8 of ``dst_shape`` (a view such as ``stack[-1]`` is fine),
        not overlapping ``src``.  With one channel, ``(H, W, 1)`` / ``(h, w, 1)`` too.
        """
        self._run(src, None, dst)

    def pool_resize(self, a, b, dst):
        """``resize(np.maximum(a, b), dst)``, the max taken while reading ``a`` and ``b``."""
        self._run(a, b, dst)
