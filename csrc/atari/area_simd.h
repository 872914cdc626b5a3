/* The vector helpers of csrc/atari/_resize.pyx (see its docstring): SSE2 on x86-64, GCC/Clang
   vector extensions elsewhere, else plain C; each computes the same float32 operations.
   Plain C, no Python.h; included once, by _resize.pyx. */
#ifndef FASTVEC_AREA_SIMD_H
#define FASTVEC_AREA_SIMD_H

/* OpenCV rounds every product and every sum: no a*b+c -> fma(a, b, c), which
   GCC (-ffp-contract=fast by default) makes wherever the target has FMA. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize ("fp-contract=off")
#endif
#include <float.h>
#include <stdint.h>
#include <string.h>
/* float32 expressions evaluated in float32 (not x87's 80 bits), as OpenCV's are */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#define FV_EXACT 0
#else
#define FV_EXACT 1
#endif

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#define FV_SIMD_NAME "sse2"
typedef __m128 fv_f4;
static inline fv_f4 fv_load(const float *p) { return _mm_load_ps(p); }
static inline void fv_store(float *p, fv_f4 v) { _mm_store_ps(p, v); }
static inline fv_f4 fv_set1(float x) { return _mm_set1_ps(x); }
static inline fv_f4 fv_mul(fv_f4 a, fv_f4 b) { return _mm_mul_ps(a, b); }
static inline fv_f4 fv_add(fv_f4 a, fv_f4 b) { return _mm_add_ps(a, b); }
/* Columns c0..c3 of four rows -> rows l = 0..3 at out + l*stride. */
static inline void fv_store_t4(float *out, Py_ssize_t stride, fv_f4 c0, fv_f4 c1,
                               fv_f4 c2, fv_f4 c3) {
    _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
    _mm_store_ps(out, c0); _mm_store_ps(out + stride, c1);
    _mm_store_ps(out + 2*stride, c2); _mm_store_ps(out + 3*stride, c3);
}

/* Four rows of 16 bytes from column sx (the max of a and b when b is given)
   -> 16 columns of 4 floats: out[i*step + l] = row l [sx + i]. */
static inline void fv_strip16(const uint8_t *const *a, const uint8_t *const *b,
                              int sx, float *out, int step) {
    __m128i r[4], z = _mm_setzero_si128();
    int l, i;
    for (l = 0; l < 4; l++) {
        r[l] = _mm_loadu_si128((const __m128i *)(a[l] + sx));
        if (b) r[l] = _mm_max_epu8(r[l], _mm_loadu_si128((const __m128i *)(b[l] + sx)));
    }
    __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
    __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
    __m128i g[4];  /* g[i]: columns 4i..4i+3, each its four rows' bytes */
    g[0] = _mm_unpacklo_epi16(lo01, lo23); g[1] = _mm_unpackhi_epi16(lo01, lo23);
    g[2] = _mm_unpacklo_epi16(hi01, hi23); g[3] = _mm_unpackhi_epi16(hi01, hi23);
    for (i = 0; i < 4; i++) {
        __m128i w0 = _mm_unpacklo_epi8(g[i], z), w1 = _mm_unpackhi_epi8(g[i], z);
        float *o = out + 4*i*step;
        _mm_store_ps(o, _mm_cvtepi32_ps(_mm_unpacklo_epi16(w0, z)));
        _mm_store_ps(o + step, _mm_cvtepi32_ps(_mm_unpackhi_epi16(w0, z)));
        _mm_store_ps(o + 2*step, _mm_cvtepi32_ps(_mm_unpacklo_epi16(w1, z)));
        _mm_store_ps(o + 3*step, _mm_cvtepi32_ps(_mm_unpackhi_epi16(w1, z)));
    }
}

/* resizeAreaFast 2x2, 1, 3 or 4 channels, on rows a0, a1 (max'd with b0, b1 when
   given): out[d] = (the four pixels' sum + 2) >> 2 for the first destination
   pixels, 16 source bytes a step; returns how many pixels it wrote (the caller
   does the rest, and for 3 channels rewrites the 5 bytes past them). */
static inline int fv_2x2(const uint8_t *a0, const uint8_t *a1, const uint8_t *b0,
                         const uint8_t *b1, uint8_t *out, int w, int Wc, int cn) {
    const __m128i z = _mm_setzero_si128(), two = _mm_set1_epi16(2);
    __m128i r0, r1, s0, s1, t0, t1;
    int dx = 0;
#define FV_LOAD2(i) do { \
        r0 = _mm_loadu_si128((const __m128i *)(a0 + (i))); \
        r1 = _mm_loadu_si128((const __m128i *)(a1 + (i))); \
        if (b0) { r0 = _mm_max_epu8(r0, _mm_loadu_si128((const __m128i *)(b0 + (i)))); \
                  r1 = _mm_max_epu8(r1, _mm_loadu_si128((const __m128i *)(b1 + (i)))); } \
    } while (0)
    if (cn == 1) {
        const __m128i low = _mm_set1_epi16(0x00ff);
        for (; dx + 8 <= w; dx += 8) {
            FV_LOAD2(2 * dx);
            s0 = _mm_add_epi16(_mm_srli_epi16(r0, 8), _mm_and_si128(r0, low));
            s1 = _mm_add_epi16(_mm_srli_epi16(r1, 8), _mm_and_si128(r1, low));
            s0 = _mm_srli_epi16(_mm_add_epi16(_mm_add_epi16(s0, s1), two), 2);
            _mm_storel_epi64((__m128i *)(out + dx), _mm_packus_epi16(s0, z));
        }
    } else if (cn == 4) {
        for (; dx + 2 <= w; dx += 2) {  /* 16 bytes: 4 source pixels */
            FV_LOAD2(8 * dx);
            t0 = _mm_unpacklo_epi8(r0, z); t1 = _mm_unpacklo_epi8(r1, z);
            s0 = _mm_add_epi16(_mm_add_epi16(t0, _mm_srli_si128(t0, 8)),
                               _mm_add_epi16(t1, _mm_srli_si128(t1, 8)));
            t0 = _mm_unpackhi_epi8(r0, z); t1 = _mm_unpackhi_epi8(r1, z);
            s1 = _mm_add_epi16(_mm_add_epi16(t0, _mm_srli_si128(t0, 8)),
                               _mm_add_epi16(t1, _mm_srli_si128(t1, 8)));
            s0 = _mm_srli_epi16(_mm_add_epi16(_mm_unpacklo_epi64(s0, s1), two), 2);
            _mm_storel_epi64((__m128i *)(out + 4 * dx), _mm_packus_epi16(s0, z));
        }
    } else if (cn == 3) {
        /* 2 destination pixels a step from 12 of 16 loaded bytes; each 8-byte store
           carries 3 good bytes, the rest is rewritten by the next step or the tail. */
        for (; 6 * dx + 16 <= Wc && 3 * dx + 11 <= 3 * w; dx += 2) {
            FV_LOAD2(6 * dx);
            t0 = _mm_unpacklo_epi8(r0, z); t1 = _mm_unpacklo_epi8(r1, z);
            s0 = _mm_add_epi16(_mm_add_epi16(t0, _mm_srli_si128(t0, 6)),
                               _mm_add_epi16(t1, _mm_srli_si128(t1, 6)));
            t0 = _mm_unpacklo_epi8(_mm_srli_si128(r0, 6), z);
            t1 = _mm_unpacklo_epi8(_mm_srli_si128(r1, 6), z);
            s1 = _mm_add_epi16(_mm_add_epi16(t0, _mm_srli_si128(t0, 6)),
                               _mm_add_epi16(t1, _mm_srli_si128(t1, 6)));
            s0 = _mm_srli_epi16(_mm_add_epi16(s0, two), 2);
            s1 = _mm_srli_epi16(_mm_add_epi16(s1, two), 2);
            _mm_storel_epi64((__m128i *)(out + 3 * dx), _mm_packus_epi16(s0, z));
            _mm_storel_epi64((__m128i *)(out + 3 * dx + 3), _mm_packus_epi16(s1, z));
        }
    }
#undef FV_LOAD2
    return dx;
}

/* saturate_cast<uchar> of 16 floats: round half to even (_mm_cvtps_epi32, as
   OpenCV's v_round), saturating packs. */
static inline void fv_round16(fv_f4 v0, fv_f4 v1, fv_f4 v2, fv_f4 v3, uint8_t *out) {
    __m128i w0 = _mm_packs_epi32(_mm_cvtps_epi32(v0), _mm_cvtps_epi32(v1));
    __m128i w1 = _mm_packs_epi32(_mm_cvtps_epi32(v2), _mm_cvtps_epi32(v3));
    _mm_storeu_si128((__m128i *)out, _mm_packus_epi16(w0, w1));
}
#else
#if defined(__GNUC__) || defined(__clang__)
#define FV_SIMD_NAME "vector"
/* GCC / Clang vector extensions: NEON on aarch64, whatever the target has. */
typedef float fv_f4 __attribute__((vector_size(16)));
#define FV_LANE(v, i) ((v)[i])
static inline fv_f4 fv_mul(fv_f4 a, fv_f4 b) { return a * b; }
static inline fv_f4 fv_add(fv_f4 a, fv_f4 b) { return a + b; }
#else
#define FV_SIMD_NAME "scalar"
typedef struct { float v[4]; } fv_f4;
#define FV_LANE(x, i) ((x).v[i])
static inline fv_f4 fv_mul(fv_f4 a, fv_f4 b) {
    fv_f4 r; int i; for (i = 0; i < 4; i++) r.v[i] = a.v[i] * b.v[i]; return r; }
static inline fv_f4 fv_add(fv_f4 a, fv_f4 b) {
    fv_f4 r; int i; for (i = 0; i < 4; i++) r.v[i] = a.v[i] + b.v[i]; return r; }
#endif
static inline fv_f4 fv_load(const float *p) { fv_f4 r; memcpy(&r, p, sizeof r); return r; }
static inline void fv_store(float *p, fv_f4 v) { memcpy(p, &v, sizeof v); }
static inline fv_f4 fv_set1(float x) {
    fv_f4 r; int i; for (i = 0; i < 4; i++) FV_LANE(r, i) = x; return r; }
static inline void fv_store_t4(float *out, Py_ssize_t stride, fv_f4 c0, fv_f4 c1,
                               fv_f4 c2, fv_f4 c3) {
    int l;
    for (l = 0; l < 4; l++) {
        out[l*stride + 0] = FV_LANE(c0, l); out[l*stride + 1] = FV_LANE(c1, l);
        out[l*stride + 2] = FV_LANE(c2, l); out[l*stride + 3] = FV_LANE(c3, l);
    }
}
static inline void fv_strip16(const uint8_t *const *a, const uint8_t *const *b,
                              int sx, float *out, int step) {
    int l, i;
    for (l = 0; l < 4; l++)
        for (i = 0; i < 16; i++) {
            uint8_t u = a[l][sx + i], w = b ? b[l][sx + i] : 0;
            out[i*step + l] = (float)(u > w ? u : w);
        }
}
static inline int fv_2x2(const uint8_t *a0, const uint8_t *a1, const uint8_t *b0,
                         const uint8_t *b1, uint8_t *out, int w, int Wc, int cn) {
    return 0;  /* the caller's loop does it all */
}
static inline uint8_t fv_round_u8(float x);
static inline void fv_round16(fv_f4 v0, fv_f4 v1, fv_f4 v2, fv_f4 v3, uint8_t *out) {
    int i;
    for (i = 0; i < 4; i++) {
        out[i] = fv_round_u8(FV_LANE(v0, i)); out[4 + i] = fv_round_u8(FV_LANE(v1, i));
        out[8 + i] = fv_round_u8(FV_LANE(v2, i)); out[12 + i] = fv_round_u8(FV_LANE(v3, i));
    }
}
#endif

/* saturate_cast<uchar>(x) for x >= 0: 1.5 * 2**23 makes the float32 sum round
   x to an integer, half to even (as cvRound), exactly for x < 2**22. */
static inline uint8_t fv_round_u8(float x) {
    float t = x + 12582912.0f;
    int v = (int)(t - 12582912.0f);
    return (uint8_t)(v > 255 ? 255 : v);
}

#endif /* FASTVEC_AREA_SIMD_H */
