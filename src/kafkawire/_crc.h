/*
 * CRC32 (IEEE 802.3, as zlib.crc32) and CRC32C (Castagnoli) for kafkawire._codec.
 *
 * Header-only so setup.py needs no extra sources.  All functions take and return the
 * *finished* CRC value (pre/post inversion done here), so calls chain like zlib.crc32:
 *     kw_crc32c(kw_crc32c(0, a, na), b, nb) == kw_crc32c(0, a + b, na + nb)
 *
 * CRC32C paths, chosen once by kw_crc_init():
 *   "sse4.2": x86_64 crc32 instruction, three independent streams so the instruction's
 *             3-cycle latency is hidden: 24 KiB blocks merged with a precomputed "shift by
 *             8 KiB of zeros" table, then one pass of three equal streams over the rest
 *             merged by carry-less multiplication (PCLMULQDQ; without it the rest is one
 *             chain).  Compiled with a per-function target attribute so the module still
 *             runs on CPUs without SSE4.2.
 *   "armv8":  ARMv8 CRC extension (__crc32cd), detected at run time on Linux.
 *   "table":  portable slice-by-8.
 * CRC32 (IEEE): carry-less multiply folding (x86_64 PCLMULQDQ, 64 bytes per step) for
 * buffers of 64 bytes and more when the CPU has it, else slice-by-8.  The table path
 * (KAFKAWIRE_CRC32C=table) uses slice-by-8 for both.  Magic 0/1 message sets checksum
 * every message and every compressed wrapper with it.
 */
#ifndef KAFKAWIRE_CRC_H
#define KAFKAWIRE_CRC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KW_CRC_TABLE 0
#define KW_CRC_SSE42 1
#define KW_CRC_ARMV8 2
#define KW_CRC_SSE42_NO_CLMUL 3 /* reported by kw_crc_init only: runs as KW_CRC_SSE42 */

#define KW_POLY_IEEE 0xedb88320u   /* reflected 0x04C11DB7 */
#define KW_POLY_CASTAGNOLI 0x82f63b78u /* reflected 0x1EDC6F41 */

static uint32_t kw_tab_ieee[8][256];
static uint32_t kw_tab_c[8][256];
static int kw_crc_impl = KW_CRC_TABLE;

static void kw_make_tables(uint32_t tab[8][256], uint32_t poly)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        tab[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = tab[0][n];
        for (int k = 1; k < 8; k++) {
            c = tab[0][c & 0xff] ^ (c >> 8);
            tab[k][n] = c;
        }
    }
}

static inline uint64_t kw_load64le(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Raw register update (no inversion), slice-by-8. */
static uint32_t kw_sb8(uint32_t tab[8][256], uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = kw_load64le(p) ^ crc;
        crc = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^
              tab[4][(w >> 24) & 0xff] ^ tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^
              tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* ---- CRC32 (IEEE) by carry-less multiplication, x86_64 ---------------------------------
 * Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"):
 * four 128-bit lanes are each multiplied forward by x^512 (mod P) and XORed with the next
 * 64 bytes; at the end the lanes fold into one by x^128.  The folded 16 bytes have the
 * same CRC remainder as everything they replace, so the slice-by-8 table finishes them
 * and the tail: no Barrett reduction needed.  Constants: x^(4*128+32) and x^(4*128-32)
 * mod P (fold by 4), x^(128+32) and x^(128-32) mod P (fold by 1), bit-reflected. */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define KW_HAVE_PCLMUL_PATH 1
#include <immintrin.h>
#define KW_TARGET_PCLMUL __attribute__((target("pclmul,sse2")))
static int kw_crc32_fold = 0;

static int kw_cpu_has_pclmul(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul");
}

static KW_TARGET_PCLMUL inline __m128i kw_fold16(__m128i x, __m128i k, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)), next);
}

/* Raw register update (no inversion); n >= 64. */
static KW_TARGET_PCLMUL uint32_t kw_crc32_pclmul(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m128i k4 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL); /* fold by 4 lanes */
    const __m128i k1 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL); /* fold by 1 lane */
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    unsigned char last[16];
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = kw_fold16(x0, k4, _mm_loadu_si128((const __m128i *)p));
        x1 = kw_fold16(x1, k4, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = kw_fold16(x2, k4, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = kw_fold16(x3, k4, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x0 = kw_fold16(x0, k1, x1);
    x0 = kw_fold16(x0, k1, x2);
    x0 = kw_fold16(x0, k1, x3);
    while (n >= 16) {
        x0 = kw_fold16(x0, k1, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)last, x0);
    return kw_sb8(kw_tab_ieee, kw_sb8(kw_tab_ieee, 0, last, 16), p, n);
}
#endif

static uint32_t kw_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
#ifdef KW_HAVE_PCLMUL_PATH
    if (kw_crc32_fold && n >= 64)
        return ~kw_crc32_pclmul(~crc, p, n);
#endif
    return ~kw_sb8(kw_tab_ieee, ~crc, p, n);
}

/* ---- shift operators for merging parallel streams -------------------------------------
 * The raw CRC register is linear over GF(2): the register after A||B (|B| = len) equals
 * shift_len(register after A) ^ (register over B started from 0).  shift_len is a 32x32
 * bit matrix; we store it as 4 byte-indexed tables so applying it costs 4 lookups. */
#define KW_LONG 8192  /* bytes per stream, long blocks */
static uint32_t kw_shift_long[4][256];

static void kw_make_shift(uint32_t shift[4][256], size_t len)
{
    static const unsigned char zeros[KW_LONG];
    uint32_t basis[32];
    for (int i = 0; i < 32; i++)
        basis[i] = kw_sb8(kw_tab_c, (uint32_t)1 << i, zeros, len);
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1u << i))
                    v ^= basis[8 * k + i];
            shift[k][b] = v;
        }
    }
}

static inline uint32_t kw_shift(uint32_t shift[4][256], uint32_t crc)
{
    return shift[0][crc & 0xff] ^ shift[1][(crc >> 8) & 0xff] ^ shift[2][(crc >> 16) & 0xff] ^
           shift[3][crc >> 24];
}

/* ---- x86_64 SSE4.2 ------------------------------------------------------------------- */
#if defined(__x86_64__) || defined(_M_X64)
#define KW_HAVE_SSE42_PATH 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#include <nmmintrin.h>
#include <wmmintrin.h>
#define KW_TARGET_SSE42
#define KW_CRC8(c, b) _mm_crc32_u8((c), (b))
#define KW_CRC16(c, h) _mm_crc32_u16((c), (h))
#define KW_CRC32(c, w) _mm_crc32_u32((c), (w))
#define KW_CRC64(c, w) ((uint32_t)_mm_crc32_u64((c), (w)))
static int kw_cpu_has_sse42(void)
{
    int info[4];
    __cpuid(info, 1);
    return (info[2] >> 20) & 1;
}
static int kw_cpu_has_clmul(void)
{
    int info[4];
    __cpuid(info, 1);
    return (info[2] >> 1) & 1;
}
#else
#include <immintrin.h>
#define KW_TARGET_SSE42 __attribute__((target("sse4.2,pclmul")))
#define KW_CRC8(c, b) __builtin_ia32_crc32qi((c), (b))
#define KW_CRC16(c, h) __builtin_ia32_crc32hi((c), (h))
#define KW_CRC32(c, w) __builtin_ia32_crc32si((c), (w))
#define KW_CRC64(c, w) ((uint32_t)__builtin_ia32_crc32di((c), (w)))
static int kw_cpu_has_sse42(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
static int kw_cpu_has_clmul(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul");
}
#endif

/* Three streams of m bytes each (m a multiple of 8) at p, p + m and p + 2m: one crc32
   instruction per stream per 8 bytes, so the instruction's 3-cycle latency is hidden.
   c[i] holds stream i's register, in and out. */
static KW_TARGET_SSE42 inline void kw_sse42_streams3(uint64_t c[3], const unsigned char *p,
                                                     size_t m)
{
    uint64_t c0 = c[0], c1 = c[1], c2 = c[2];
    const unsigned char *end = p + m;
    do {
        c0 = KW_CRC64((uint32_t)c0, kw_load64le(p));
        c1 = KW_CRC64((uint32_t)c1, kw_load64le(p + m));
        c2 = KW_CRC64((uint32_t)c2, kw_load64le(p + 2 * m));
        p += 8;
    } while (p < end);
    c[0] = c0;
    c[1] = c1;
    c[2] = c2;
}

/* Whole blocks of three KW_LONG streams.  Every stream starts from 0 and the running CRC
   is merged in after them, so the three crc32 chains of the next block do not wait for
   the table lookups of this one. */
static KW_TARGET_SSE42 uint32_t kw_sse42_long(uint32_t crc, const unsigned char **pp,
                                              size_t *pn)
{
    const unsigned char *p = *pp;
    size_t n = *pn;
    while (n >= 3 * KW_LONG) {
        uint64_t c[3] = {0, 0, 0};
        kw_sse42_streams3(c, p, KW_LONG);
        crc = kw_shift(kw_shift_long, crc) ^ (uint32_t)c[0];
        crc = kw_shift(kw_shift_long, crc) ^ (uint32_t)c[1];
        crc = kw_shift(kw_shift_long, crc) ^ (uint32_t)c[2];
        p += 3 * KW_LONG;
        n -= 3 * KW_LONG;
    }
    *pp = p;
    *pn = n;
    return crc;
}

/* Shorter than this, the rest is cheaper as one chain than as three streams and two
   multiplications (measured: 40-64 bytes ~25% faster as one chain, equal at ~100). */
#define KW_STREAMS_MIN 96
/* kw_kstream[m / 8] = x^(8m - 33) mod P, bit-reflected, for streams of m bytes.  The
   carry-less product of a CRC register c and it, reduced by the crc32 instruction (which
   multiplies by x^32 on its own, and the reflected product carries one more x), is c
   shifted by m zero bytes: a 3-stream pass of any length merges in ~20 cycles, with no
   fixed block sizes (each a loop exit the branch predictor misses, and a tail left over:
   a 16 KiB batch paid ~70 ns for those, ~10% of its CRC time). */
static uint32_t kw_kstream[KW_LONG / 8 + 1];
static int kw_sse42_clmul = 0; /* PCLMULQDQ too: else the rest is one chain */

static void kw_make_kstream(void)
{
    static const unsigned char zeros[8];
    uint32_t c = 1; /* bit 0 is x^31: x^(8*8 - 33) */
    kw_kstream[1] = c;
    for (size_t i = 2; i <= KW_LONG / 8; i++) {
        c = kw_sb8(kw_tab_c, c, zeros, 8); /* times x^64 */
        kw_kstream[i] = c;
    }
}

static KW_TARGET_SSE42 inline uint32_t kw_shift_clmul(uint32_t c, uint32_t k)
{
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)c), _mm_cvtsi32_si128((int)k),
                                        0x00);
    return KW_CRC64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* 2 and 4 bytes in one crc32 instruction (x86 is little-endian, as the CRC reads them) */
static KW_TARGET_SSE42 inline uint32_t kw_crc2(uint32_t crc, const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return KW_CRC16(crc, h);
}

static KW_TARGET_SSE42 inline uint32_t kw_crc4(uint32_t crc, const unsigned char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return KW_CRC32(crc, w);
}

static KW_TARGET_SSE42 uint32_t kw_crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    if (n >= 8) { /* to an 8-byte boundary in at most three steps (one chain) */
        if ((uintptr_t)p & 1) {
            crc = KW_CRC8(crc, *p);
            p += 1;
            n -= 1;
        }
        if ((uintptr_t)p & 2) {
            crc = kw_crc2(crc, p);
            p += 2;
            n -= 2;
        }
        if ((uintptr_t)p & 4) {
            crc = kw_crc4(crc, p);
            p += 4;
            n -= 4;
        }
    }
    crc = kw_sse42_long(crc, &p, &n);
    if (kw_sse42_clmul && n >= KW_STREAMS_MIN) { /* n < 3 * KW_LONG here */
        size_t m = (n / 24) * 8;
        uint64_t c[3] = {crc, 0, 0};
        uint32_t k = kw_kstream[m / 8];
        kw_sse42_streams3(c, p, m);
        crc = kw_shift_clmul((uint32_t)c[0], k) ^ (uint32_t)c[1];
        crc = kw_shift_clmul(crc, k) ^ (uint32_t)c[2];
        p += 3 * m;
        n -= 3 * m;
    }
    while (n >= 8) {
        crc = KW_CRC64(crc, kw_load64le(p));
        p += 8;
        n -= 8;
    }
    if (n & 4) {
        crc = kw_crc4(crc, p);
        p += 4;
    }
    if (n & 2) {
        crc = kw_crc2(crc, p);
        p += 2;
    }
    if (n & 1)
        crc = KW_CRC8(crc, *p);
    return ~crc;
}
#endif /* x86_64 */

/* ---- aarch64 ARMv8 CRC extension ----------------------------------------------------- */
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define KW_HAVE_ARMV8_PATH 1
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
static int kw_cpu_has_armv8_crc(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#elif defined(__APPLE__)
static int kw_cpu_has_armv8_crc(void) { return 1; } /* every Apple arm64 CPU has it */
#else
static int kw_cpu_has_armv8_crc(void) { return 0; }
#endif
#if defined(__clang__)
#define KW_TARGET_CRC __attribute__((target("crc")))
#else
#define KW_TARGET_CRC __attribute__((target("+crc")))
#endif
static KW_TARGET_CRC uint32_t kw_crc32c_armv8(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        crc = __crc32cb(crc, *p++);
        n--;
    }
    /* three streams, as on x86: the instruction has multi-cycle latency */
    while (n >= 3 * KW_LONG) {
        uint32_t c0 = crc, c1 = 0, c2 = 0;
        const unsigned char *end = p + KW_LONG;
        do {
            c0 = __crc32cd(c0, kw_load64le(p));
            c1 = __crc32cd(c1, kw_load64le(p + KW_LONG));
            c2 = __crc32cd(c2, kw_load64le(p + 2 * KW_LONG));
            p += 8;
        } while (p < end);
        crc = kw_shift(kw_shift_long, c0) ^ c1;
        crc = kw_shift(kw_shift_long, crc) ^ c2;
        p += 2 * KW_LONG;
        n -= 3 * KW_LONG;
    }
    while (n >= 8) {
        crc = __crc32cd(crc, kw_load64le(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = __crc32cb(crc, *p++);
    return ~crc;
}
#endif /* aarch64 */

static uint32_t kw_crc32c(uint32_t crc, const unsigned char *p, size_t n)
{
#ifdef KW_HAVE_SSE42_PATH
    if (kw_crc_impl == KW_CRC_SSE42)
        return kw_crc32c_sse42(crc, p, n);
#endif
#ifdef KW_HAVE_ARMV8_PATH
    if (kw_crc_impl == KW_CRC_ARMV8)
        return kw_crc32c_armv8(crc, p, n);
#endif
    return ~kw_sb8(kw_tab_c, ~crc, p, n);
}

/* Build the tables and pick the CRC32C path; returns which (KW_CRC_*, the sse4.2 path
   without its stream merge told apart).  mode: 0 the fastest the CPU has, 1 the portable
   path, 2 the sse4.2 path without its PCLMULQDQ stream merge (what a CPU with SSE4.2 but
   no PCLMULQDQ runs; for tests). */
static int kw_crc_init(int mode)
{
    int force_table = mode == 1;
    kw_make_tables(kw_tab_ieee, KW_POLY_IEEE);
    kw_make_tables(kw_tab_c, KW_POLY_CASTAGNOLI);
    kw_make_shift(kw_shift_long, KW_LONG);
#ifdef KW_HAVE_SSE42_PATH
    kw_make_kstream();
#endif
    kw_crc_impl = KW_CRC_TABLE;
#ifdef KW_HAVE_PCLMUL_PATH
    kw_crc32_fold = !force_table && kw_cpu_has_pclmul();
#endif
    if (!force_table) {
#ifdef KW_HAVE_SSE42_PATH
        if (kw_cpu_has_sse42()) {
            kw_crc_impl = KW_CRC_SSE42;
            kw_sse42_clmul = mode != 2 && kw_cpu_has_clmul();
        }
#endif
#ifdef KW_HAVE_ARMV8_PATH
        if (kw_cpu_has_armv8_crc())
            kw_crc_impl = KW_CRC_ARMV8;
#endif
    }
#ifdef KW_HAVE_SSE42_PATH
    if (kw_crc_impl == KW_CRC_SSE42 && !kw_sse42_clmul)
        return KW_CRC_SSE42_NO_CLMUL;
#endif
    return kw_crc_impl;
}

/* kw_crc_init as KAFKAWIRE_CRC32C says: "table" mode 1, "no-clmul" mode 2, else 0.  Read
   once per module at import, so tests can cover every path on one machine. */
static int kw_crc_init_from_env(void)
{
    const char *v = getenv("KAFKAWIRE_CRC32C");
    if (v && strcmp(v, "table") == 0)
        return kw_crc_init(1);
    if (v && strcmp(v, "no-clmul") == 0)
        return kw_crc_init(2);
    return kw_crc_init(0);
}

#endif /* KAFKAWIRE_CRC_H */
