# Part of kafkawire._codec, pulled in by ``include`` in _codec.pyx (one extension module:
# its declarations are in scope here).  MessageSet (magic 0/1) and RecordBatch (magic 2)
# bytes to objects: one walker, _Decoder, for decode_batches, decode_records and
# decode_consumer_records (and decode_columnar, in _codec_columnar.pxi).
# The twin, to read side by side: _pycodec_decode.py.

# The decoders' defaults for nesting depth and decompressed size (both caps are options).
DEFAULT_MAX_DEPTH = 4
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

# ---------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------
# One walker serves the three decoders; ``mode`` says what happens to each record.  Checks
# and their order follow the twin exactly, so both raise the same error for the same bytes.

DEF MODE_BATCHES = 0
DEF MODE_RECORDS = 1
DEF MODE_VIEW = 2    # columnar: one pass writing arrays of where record fields start
DEF MODE_CONSUMER = 3  # ConsumerRecords of one partition, control batches skipped
DEF MODE_MADE = 4      # records made by the caller's factory (decode_records_with)
DEF MAX_LAYOUT = 32    # arguments a factory may take per record

# MODE_MADE's calls (see _Decoder.made_record)
cdef extern from *:
    """
    /* type->tp_new(type, args, NULL): what type.__new__(type) does for a plain class */
    static PyObject *kw_tp_new(PyObject *type, PyObject *args) {
        return ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, args, NULL);
    }
    """
    object _kw_tp_new "kw_tp_new" (object type, object args)
    object PyObject_Vectorcall(object callable, PyObject** args, size_t nargsf,
                               PyObject* kwnames)
    PyObject* PyTuple_GET_ITEM(object t, Py_ssize_t i)
    size_t PY_VECTORCALL_ARGUMENTS_OFFSET


cdef str _KIND_MSG = "message"
cdef str _KIND_BATCH = "record batch"


cdef inline int _rvar(cptr r, Py_ssize_t lim, Py_ssize_t* pos, uint64_t* out,
                      int maxbytes) noexcept nogil:
    """Varint inside a record: the byte-count limit is checked before the buffer end."""
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t start = i
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    if i < lim and r[i] < 0x80:
        out[0] = r[i]
        pos[0] = i + 1
        return VAR_OK
    while True:
        if i - start == maxbytes:
            return VAR_LONG
        if i >= lim:
            return VAR_TRUNC
        b = r[i]
        i += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
    pos[0] = i
    out[0] = result
    return VAR_OK


cdef inline int _rspan(cptr r, Py_ssize_t lim, Py_ssize_t* pos, Py_ssize_t end,
                       bint nullable, cptr* start, int64_t* n) noexcept nogil:
    """One varint-length-prefixed field of a record (key, value, header key or value).

    Sets start/n (n = -1 for null when nullable) and moves pos past the field's bytes,
    which must end by ``end``; returns a VAR_* or SPAN_* status.
    """
    cdef uint64_t u
    cdef int st = _rvar(r, lim, pos, &u, 5)
    if st:
        n[0] = 0  # unused by the caller's error path; set so n is never uninitialised
        return st
    n[0] = _zz32(u)
    start[0] = r + pos[0]
    if n[0] < 0:
        return VAR_OK if nullable and n[0] == -1 else SPAN_BAD_LENGTH
    if pos[0] + n[0] > end:
        return SPAN_PAST_END
    pos[0] += n[0]
    return VAR_OK


# Offsets inside magic 1 wrappers are shifted (KIP-31) by amounts read from the wire; a
# damaged wrapper can shift them outside int64.  The shift is kept exact in 128 bits so
# such offsets are reported (as the twin does with Python ints) instead of wrapping.
cdef struct I128:
    int64_t hi
    uint64_t lo

cdef inline I128 _i128(int64_t v) noexcept nogil:
    cdef I128 r
    r.hi = -1 if v < 0 else 0
    r.lo = <uint64_t>v
    return r

cdef inline I128 _i128_add(I128 a, I128 b) noexcept nogil:
    cdef I128 r
    r.lo = a.lo + b.lo
    r.hi = a.hi + b.hi + (1 if r.lo < a.lo else 0)
    return r

cdef inline I128 _i128_sub(I128 a, I128 b) noexcept nogil:
    cdef I128 r
    r.lo = a.lo - b.lo
    r.hi = a.hi - b.hi - (1 if a.lo < b.lo else 0)
    return r

cdef inline bint _i128_lt(I128 a, I128 b) noexcept nogil:
    return a.hi < b.hi or (a.hi == b.hi and a.lo < b.lo)

cdef inline bint _i128_fits(I128 a) noexcept nogil:
    return a.hi == (-1 if <int64_t>a.lo < 0 else 0)

cdef object _i128_py(I128 a):
    return (<object>a.hi) * 18446744073709551616 + <object>a.lo

cdef inline bint _add_overflows(int64_t a, int64_t b) noexcept nogil:
    return (b > 0 and a > INT64_MAX - b) or (b < 0 and a < INT64_MIN - b)

cdef str _outside_int64(str what, value):
    return f"{what} {value} is outside the int64 range"

cdef str _span_error(first, last):
    return f"inner message offsets {first} to {last} span more than the int64 range"


cdef object _rec_error(int64_t base_offset, int32_t k, int status, int maxbytes):
    if status == VAR_LONG:
        return _errors.corrupt(_KIND_BATCH, base_offset,
                               f"record {k}: varint longer than {maxbytes} bytes")
    return _errors.corrupt(_KIND_BATCH, base_offset,
                           f"record {k}: runs past the end of the batch")


cdef object _rec_corrupt(int64_t base_offset, int32_t k, str problem):
    return _errors.corrupt(_KIND_BATCH, base_offset, f"record {k}: {problem}")


cdef object _span_corrupt(int64_t base_offset, int32_t k, int status, str what, int64_t n):
    """The error for a non-zero _rspan status on field ``what`` of record k."""
    if status == SPAN_BAD_LENGTH:
        return _rec_corrupt(base_offset, k, f"invalid {what} length {n}")
    if status == SPAN_PAST_END:
        return _rec_corrupt(base_offset, k, f"{what} of {n} bytes runs past the end of the record")
    return _rec_error(base_offset, k, status, 5)


# MODE_VIEW output: per kept record its offset, timestamp, timestamp type, and where its
# key and value start (in the address space of the decoder's buffers) with their lengths;
# per header the same for its key and value.  The loop over records of the common shape
# (kw_v2_run) is plain C, written out below: a tight loop of its own (not inlined into
# _Decoder.batch), its rare exits marked unlikely.  It is most of a columnar decode's time.
cdef extern from *:
    """
    #include <stdint.h>
    /* One block (see _Decoder.relayout) with cap records' room per array, at fixed places
       kw_v2_body relies on: off 0, ts 8*cap, ks 16*cap, kl 24*cap, vl 28*cap, vs 32*cap
       (bytes), then hidx and tt. */
    typedef struct {
        int64_t *off; int64_t *ts; int8_t *tt; int32_t *kl; int32_t *vl; int32_t *hidx;
        int64_t *ks; int64_t *vs; Py_ssize_t n; Py_ssize_t cap;
        int64_t *hks; int32_t *hkl; int64_t *hvs; int32_t *hvl; Py_ssize_t nh; Py_ssize_t hcap;
    } kw_vout;

    /* kw_v2_run reads a few bytes past a field before checking it (at most 3 per varint,
       and it reads only where lengths checked against the record's end led): it takes a
       record only with this many readable bytes after the record's end. */
    #define KW_SLACK 16

    #if defined(__GNUC__) || defined(__clang__)
    #define KW_NOINLINE __attribute__((noinline))
    #define KW_INLINE static inline __attribute__((always_inline))
    #define KW_UNLIKELY(x) __builtin_expect(!!(x), 0)
    #define KW_OPAQUE(x) __asm__("" : "+r"(x))
    #else
    #define KW_OPAQUE(x) ((void)0)
    #define KW_NOINLINE
    #define KW_INLINE static __forceinline
    #define KW_UNLIKELY(x) (x)
    #endif

    /* The varint at p[x] if it takes 1 to 3 bytes (3 are readable): into u, x moved past
       it; else FAIL.  Each size adds its own constant, so no size is carried around. */
    #define KW_VAR3(p, x, u, FAIL)                                                 \
        do {                                                                       \
            uint32_t b0_ = (p)[x], b1_, b2_;                                       \
            if (b0_ < 0x80) {                                                      \
                (u) = b0_;                                                         \
                (x) += 1;                                                          \
            } else if ((b1_ = (p)[(x) + 1]) < 0x80) {                              \
                (u) = (b0_ & 0x7F) | (b1_ << 7);                                   \
                (x) += 2;                                                          \
            } else if ((b2_ = (p)[(x) + 2]) < 0x80) {                              \
                (u) = (b0_ & 0x7F) | ((b1_ & 0x7F) << 7) | (b2_ << 14);            \
                (x) += 3;                                                          \
            } else {                                                               \
                FAIL;                                                              \
            }                                                                      \
        } while (0)

    /* MODE_VIEW's loop over the records of a batch (see _v2_run in _codec.pyx).  It runs
       at ~5 instructions per cycle, so every instruction counts: positions are kept in
       the view's address space (rv[rbase + x] is r[x], no add per stored start), the
       records left count down, and a value length is checked by the record's end check
       alone (q moves by at most 2^21 there, and nothing is read at it).  The six
       arrays are written through two pointers walking the block (po: int64 columns, pl:
       int32 ones) and the distance h = 4*cap, as [po], [po+2h], [po+4h], [po+8h], [pl],
       [pl+h]: three registers, not six pointers and an index, so the loop's values stay
       in registers (six pointers were reloaded from the stack per record).  kw_v2_run
       below makes a copy of it for the usual batch (CreateTime, every record kept). */
    KW_INLINE Py_ssize_t kw_v2_body(
        const unsigned char *r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
        int32_t *kp, int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int lat, int emit, int64_t start, int64_t rbase, kw_vout *o, const int keep_all)
    {
        Py_ssize_t i, i0 = o->n, q, rec_end, j, end;
        int32_t k = *kp, left;
        int32_t nh = (int32_t)o->nh, *hidx;
        unsigned char *po = (unsigned char *)(o->off + i0), *pl = (unsigned char *)(o->kl + i0);
        Py_ssize_t h = 4 * o->cap;
        uint64_t ts_mask = lat ? 0 : ~(uint64_t)0;
        const unsigned char *rv = (const unsigned char *)((uintptr_t)r - (uintptr_t)rbase);
        if (lat)
            base_ts = max_ts;
        if (!emit)
            start = INT64_MAX; /* a control batch: checked, nothing kept */
        /* records must end by here: in the batch, with KW_SLACK readable bytes after them
           (so a record starting at the batch's end is refused by its length: no check of
           rpos against rn per record) */
        end = rlim - KW_SLACK < rn ? rlim - KW_SLACK : rn;
        if (rpos >= end || k >= count)
            goto done;
        end += rbase;
        rpos += rbase;
        left = count - k;
        for (;;) {
            uint32_t u, ut, uo, uk, uv;
            int64_t kl, vl, ks, vs, offset;
            unsigned char last;
            q = rpos;
            KW_VAR3(rv, q, u, goto stop);
            if (KW_UNLIKELY(u & 1)) /* a negative length */
                break;
            rec_end = q + (Py_ssize_t)(u >> 1);
            if (KW_UNLIKELY(rec_end > end))
                break;
            /* The header count, 0 in one byte, must be the record's last byte: read it
               now, off the chain of fields that leads to it. */
            last = rv[rec_end - 1];
            q += 1; /* attributes: unused (KIP-98) */
            KW_VAR3(rv, q, ut, goto stop);
            KW_VAR3(rv, q, uo, goto stop);
            if (KW_UNLIKELY(uo & 1)) /* a negative offset delta: the general loop's */
                break;
            KW_VAR3(rv, q, uk, goto stop);
            ks = q;
            if (!(uk & 1)) {
                kl = (int64_t)(uk >> 1);
                if (KW_UNLIKELY(q + kl > rec_end))
                    break;
                q += kl;
            } else if (uk == 1) {
                kl = -1;
            } else {
                break; /* a negative length other than -1 (null) */
            }
            KW_VAR3(rv, q, uv, goto stop);
            vs = q;
            if (!(uv & 1)) {
                vl = (int64_t)(uv >> 1);
                q += vl;
            } else if (uv == 1) {
                vl = -1;
            } else {
                break;
            }
            /* no headers (a count of 0 in one byte), nothing after them */
            if (KW_UNLIKELY(((q + 1) ^ rec_end) | last))
                break;
            offset = base_offset + (int64_t)(uo >> 1);
            if (keep_all || offset >= start) {
                KW_OPAQUE(h); /* keeps h a register: no pointer per array derived from it */
                *(int64_t *)po = offset;
                *(int64_t *)(po + 2 * h) = base_ts + (int64_t)((uint64_t)(int64_t)(int32_t)
                                              ((ut >> 1) ^ (0 - (ut & 1))) & ts_mask);
                *(int64_t *)(po + 4 * h) = ks;
                *(int64_t *)(po + 8 * h) = vs;
                *(int32_t *)pl = (int32_t)kl;
                *(int32_t *)(pl + h) = (int32_t)vl;
                po += 8;
                pl += 4;
            }
            rpos = rec_end;
            if (--left == 0)
                break;
        }
    stop:
        rpos -= rbase;
        k = count - left;
    done:
        i = i0 + (po - (unsigned char *)(o->off + i0)) / 8;
        if (i > i0) {
            memset(o->tt + i0, lat ? 1 : 0, (size_t)(i - i0));
            hidx = o->hidx;
            for (j = i0 + 1; j <= i; j++)
                hidx[j] = nh;
        }
        o->n = i;
        *kp = k;
        return rpos;
    }

    static KW_NOINLINE Py_ssize_t kw_v2_run(
        const unsigned char *r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
        int32_t *kp, int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int lat, int emit, int64_t start, int64_t rbase, kw_vout *o)
    {
        /* offset deltas are >= 0 in the loop, so no record is below start here */
        if (!lat && emit && start <= base_offset)
            return kw_v2_body(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts,
                              0, 1, start, rbase, o, 1);
        return kw_v2_body(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts,
                          lat, emit, start, rbase, o, 0);
    }
    """
    ctypedef struct VOut "kw_vout":
        int64_t* off
        int64_t* ts
        int8_t* tt
        int32_t* kl
        int32_t* vl
        int32_t* hidx
        int64_t* ks
        int64_t* vs
        Py_ssize_t n
        Py_ssize_t cap
        int64_t* hks
        int32_t* hkl
        int64_t* hvs
        int32_t* hvl
        Py_ssize_t nh
        Py_ssize_t hcap
    Py_ssize_t kw_v2_run(cptr r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos, int32_t* kp,
                         int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
                         bint lat, bint emit, int64_t start, int64_t rbase,
                         VOut* o) noexcept nogil


cdef inline bint _ascii(cptr p, Py_ssize_t n) noexcept nogil:
    """All bytes below 0x80 (valid UTF-8 without decoding it)."""
    cdef Py_ssize_t i
    cdef unsigned char acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


# _v2_run (kw_v2_run) takes batches whose base offset and base timestamp are within this
# of 0: adding a delta of at most 3 varint bytes cannot leave int64 then.
cdef int64_t _FAST_BASE = 4611686018427387904


cdef inline Py_ssize_t _v2_run(cptr r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
                               int32_t* kp, int32_t count, int64_t base_offset,
                               int64_t base_ts, int64_t max_ts, bint lat, bint emit,
                               int64_t start, int64_t rbase, VOut* o) noexcept nogil:
    """MODE_VIEW's loop over the records of a batch: as many whole records as it can, from
    ``rpos`` (record kp[0]); returns where it stopped.  r[:rlim] is readable.

    It takes the common shape only: varints of at most 3 bytes, an offset delta >= 0, no
    headers, fields that fill the record exactly, KW_SLACK readable bytes after it; the
    caller made room for ``count`` records and checked the bases (_FAST_BASE).  At
    anything else it stops before that record, and the general loop in _Decoder.batch
    decodes it or raises its error.  The values it keeps are the general loop's.  (The
    loop is kw_v2_run, in C.)
    """
    return kw_v2_run(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts, lat, emit,
                     start, rbase, o)


@cython.final
cdef class _Decoder:
    cdef int64_t start_offset
    cdef bint check_crcs
    cdef object max_depth
    cdef object max_size
    cdef int mode
    cdef bint include_control
    cdef list out
    cdef list cur            # records of the top-level legacy message (MODE_BATCHES)
    # the top-level legacy entry being decoded: its kept offsets, an offset outside int64
    # (raised once the entry is decoded, as the twin checks its finished records), and
    # the last record's exact offset (KIP-31 shift of an enclosing wrapper)
    cdef Py_ssize_t leg_kept
    cdef int64_t leg_first, leg_last
    cdef object leg_overflow
    cdef Py_ssize_t leaves
    cdef I128 last_leaf
    # MODE_VIEW: the arrays (in two bytearrays, grown as needed, pointers in ``o``), the buffers
    # record fields are found in (the input, then each decompressed one) with where each
    # starts in the one address space of the *_starts arrays, and the buffer being walked
    cdef VOut o
    cdef object block
    cdef object hblock
    cdef list segs
    cdef list bases
    cdef int64_t vtotal
    cdef cptr seg_ptr
    cdef int64_t seg_vbase
    # MODE_CONSUMER: the records' topic and partition, and where the last batch (or legacy
    # message) that had records at or past start_offset ends: end_base + end_delta + 1
    cdef object topic
    cdef object partition
    cdef bint has_end
    cdef int64_t end_base
    cdef int64_t end_delta
    # MODE_MADE: what makes each record (see decode_records_with), each argument's field
    # code (-1: the layout's own item), and the position: records below it are dropped
    cdef object factory
    cdef object init
    cdef tuple layout
    cdef Py_ssize_t nlayout
    cdef int codes[MAX_LAYOUT]
    cdef int64_t made_pos
    cdef bint made_end      # a record at offset INT64_MAX was made: nothing follows it
    cdef bint made_crc      # the layout asks for _FIELD_CRC

    cdef object inflate(self, object src, Py_ssize_t start, Py_ssize_t end, int codec,
                        bint legacy_lz4):
        cdef object r = _compression.decompress(codec, memoryview(src).cast("B")[start:end],
                                                self.max_size, legacy_lz4=legacy_lz4)
        if not PyBytes_CheckExact(r):
            r = bytes(r)
        if self.mode == MODE_VIEW:
            # Records are read in place in the decompressed bytes (the one copy).
            self.segs.append(memoryview(r))
            self.bases.append(self.vtotal)
            self.vtotal += PyBytes_GET_SIZE(r)
        return r

    cdef int grow(self, Py_ssize_t need) except -1:
        """Room for ``need`` records in MODE_VIEW's record block (kept records move)."""
        cdef Py_ssize_t cap = self.o.cap * 2
        if need <= self.o.cap:
            return 0
        if cap < need:
            cap = need
        if cap < 64:
            cap = 64
        self.block = self.relayout(cap)
        return 0

    cdef object relayout(self, Py_ssize_t cap):
        """A record block for ``cap`` records holding the ``o.n`` kept so far; sets the
        pointers.  Layout (kw_v2_body writes by it): offsets, timestamps, key starts
        (int64), key lengths, value lengths (int32), value starts (int64), header_index
        (cap + 1, int32), timestamp types (int8).
        One block, not a buffer per array: freed, it stays with malloc for the next
        decode, where separate buffers went back to the system and were page-faulted in
        again (a third of the time for small records)."""
        cdef Py_ssize_t n = self.o.n
        cdef object block = PyByteArray_FromStringAndSize(NULL, 45 * cap + 4)
        cdef unsigned char* b = <unsigned char*>PyByteArray_AS_STRING(block)
        cdef int64_t* off = <int64_t*>b
        cdef int64_t* ts = <int64_t*>(b + 8 * cap)
        cdef int64_t* ks = <int64_t*>(b + 16 * cap)
        cdef int32_t* kl = <int32_t*>(b + 24 * cap)
        cdef int32_t* vl = <int32_t*>(b + 28 * cap)
        cdef int64_t* vs = <int64_t*>(b + 32 * cap)
        cdef int32_t* hidx = <int32_t*>(b + 40 * cap)
        cdef int8_t* tt = <int8_t*>(b + 44 * cap + 4)
        if self.o.cap > 0:
            memcpy(off, self.o.off, 8 * n)
            memcpy(ts, self.o.ts, 8 * n)
            memcpy(ks, self.o.ks, 8 * n)
            memcpy(vs, self.o.vs, 8 * n)
            memcpy(kl, self.o.kl, 4 * n)
            memcpy(vl, self.o.vl, 4 * n)
            memcpy(hidx, self.o.hidx, 4 * (n + 1))
            memcpy(tt, self.o.tt, n)
        else:
            hidx[0] = 0
        self.o.off, self.o.ts, self.o.ks, self.o.vs = off, ts, ks, vs
        self.o.kl, self.o.vl, self.o.hidx, self.o.tt = kl, vl, hidx, tt
        self.o.cap = cap
        return block

    cdef int hgrow(self) except -1:
        """Room for one more header in MODE_VIEW's header block (layout: starts of keys,
        starts of values, key lengths, value lengths)."""
        cdef Py_ssize_t cap, nh = self.o.nh
        cdef object block
        cdef unsigned char* b
        if nh < self.o.hcap:
            return 0
        cap = self.o.hcap * 2 if self.o.hcap >= 32 else 64
        block = PyByteArray_FromStringAndSize(NULL, 24 * cap)
        b = <unsigned char*>PyByteArray_AS_STRING(block)
        if nh:
            memcpy(b, self.o.hks, 8 * nh)
            memcpy(b + 8 * cap, self.o.hvs, 8 * nh)
            memcpy(b + 16 * cap, self.o.hkl, 4 * nh)
            memcpy(b + 20 * cap, self.o.hvl, 4 * nh)
        self.o.hks = <int64_t*>b
        self.o.hvs = <int64_t*>(b + 8 * cap)
        self.o.hkl = <int32_t*>(b + 16 * cap)
        self.o.hvl = <int32_t*>(b + 20 * cap)
        self.o.hcap = cap
        self.hblock = block
        return 0

    cdef inline int keep_record(self, int64_t offset, int64_t ts, int tt, int64_t ks,
                                Py_ssize_t kl, int64_t vs, Py_ssize_t vl) except -1:
        cdef Py_ssize_t i = self.o.n
        if i >= self.o.cap:
            self.grow(i + 1)
        self.o.off[i] = offset
        self.o.ts[i] = ts
        self.o.tt[i] = <int8_t>tt
        self.o.ks[i] = ks
        self.o.kl[i] = <int32_t>kl
        self.o.vs[i] = vs
        self.o.vl[i] = <int32_t>vl
        self.o.hidx[i + 1] = <int32_t>self.o.nh
        self.o.n = i + 1
        return 0

    # ---- the top level: entries of offset int64, size int32, <size bytes> ----
    cdef int top(self, object src, cptr p, Py_ssize_t n) except -1:
        cdef Py_ssize_t pos = 0
        cdef int64_t offset
        cdef int32_t size
        cdef int magic
        while n - pos >= 12:
            offset = <int64_t>_be64(p + pos)
            size = <int32_t>_be32(p + pos + 8)
            if size > n - pos - 12:
                return 0  # a partial entry at the end of a fetch response is normal
            if size < 14:
                raise _errors.corrupt(_KIND_MSG, offset,
                                      f"size {size} is below the 14-byte minimum of any entry")
            magic = <int8_t>p[pos + 16]
            if magic == 2:
                if size < 49:
                    raise _errors.corrupt(_KIND_BATCH, offset,
                                          f"size {size} is below the 49-byte minimum for magic 2")
                self.batch(src, p, n, pos, 12 + size, offset)
            elif magic == 0 or magic == 1:
                if self.mode == MODE_BATCHES:
                    self.cur = []
                self.leg_kept = 0
                self.leg_overflow = None
                self.message(src, p, pos, 12 + size, offset, _i128(0), 0, False, 0)
                if self.leg_overflow is not None:
                    raise _errors.corrupt(_KIND_MSG, offset, _outside_int64(
                        "inner message offset", self.leg_overflow))
                if self.leg_kept and not _i128_fits(
                        _i128_sub(_i128(self.leg_last), _i128(self.leg_first))):
                    raise _errors.corrupt(_KIND_MSG, offset, _span_error(self.leg_first,
                                                                         self.leg_last))
                if self.mode == MODE_BATCHES and self.cur:
                    self.legacy_batch(p + pos + 12, magic)
            else:
                raise _errors.unsupported_magic(magic, offset)
            pos += 12 + size
        return 0

    # ---- a decompressed inner message set; a truncated one is corrupt ----
    cdef int inner_set(self, object src, cptr p, Py_ssize_t n, int depth,
                       int64_t wrapper_offset, I128 delta, bint lat, int64_t lat_ts) except -1:
        cdef Py_ssize_t pos = 0
        cdef int64_t offset
        cdef int32_t size
        cdef int magic
        while pos < n:
            if n - pos < 12:
                raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                      "compressed message set is truncated")
            offset = <int64_t>_be64(p + pos)
            size = <int32_t>_be32(p + pos + 8)
            if size > n - pos - 12:
                raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                      "compressed message set is truncated")
            if size < 14:
                raise _errors.corrupt(_KIND_MSG, offset,
                                      f"size {size} is below the 14-byte minimum of any entry")
            magic = <int8_t>p[pos + 16]
            if magic != 0 and magic != 1:
                if magic == 2:
                    raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                          "compressed message set holds a magic 2 batch")
                raise _errors.unsupported_magic(magic, offset)
            self.message(src, p, pos, 12 + size, offset, delta, depth, lat, lat_ts)
            pos += 12 + size
        return 0

    cdef int legacy_batch(self, cptr m, int magic) except -1:
        cdef Batch b = Batch.__new__(Batch)
        cdef Record first = <Record>self.cur[0]
        cdef Record last = <Record>self.cur[len(self.cur) - 1]
        cdef int attrs = m[5]
        b.base_offset = first.offset
        b.magic = magic
        b.crc = _be32(m)
        b.attributes = attrs
        b.compression = attrs & 7
        b.timestamp_type = ((attrs >> 3) & 1) if magic == 1 else -1
        b.is_transactional = False
        b.is_control = False
        b.partition_leader_epoch = -1
        b.last_offset_delta = last.offset - first.offset
        b.base_timestamp = <int64_t>_be64(m + 6) if magic == 1 else -1
        b.max_timestamp = b.base_timestamp
        b.producer_id = -1
        b.producer_epoch = -1
        b.base_sequence = -1
        b.records = self.cur
        self.out.append(b)
        return 0

    # ---- one magic 0/1 message at base[pos:pos+total]; errors name ``offset`` as written,
    # records get offset + delta (the mapping of enclosing magic 1 wrappers, KIP-31) ----
    cdef int message(self, object src, cptr base, Py_ssize_t pos, Py_ssize_t total,
                     int64_t offset, I128 delta, int depth, bint lat, int64_t lat_ts) except -1:
        cdef cptr m = base + pos + 12       # crc
        cdef Py_ssize_t size = total - 12
        cdef uint32_t stored
        cdef uint32_t computed
        cdef int magic = m[4]
        cdef int attrs = m[5]
        cdef int codec = attrs & 7
        cdef Py_ssize_t q = 6
        cdef int64_t ts = -1
        cdef int tt = -1
        cdef int32_t kl, vl
        cdef cptr k
        cdef cptr v
        cdef object inner
        cdef cptr ip
        cdef Py_ssize_t ipos, iend
        cdef int64_t absolute
        cdef I128 exact, last_inner
        cdef int32_t isize
        cdef cptr outer_ptr
        cdef int64_t outer_vbase
        cdef int last_codec
        cdef _Decoder sub
        if magic == 1 and size < 22:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"size {size} is below the 22-byte minimum for magic 1")
        stored = _be32(m)
        if self.check_crcs:
            computed = _crc32(m + 4, size - 4)
            if computed != stored:
                raise _errors.crc_mismatch(_KIND_MSG, offset, stored, computed)
        if magic == 1:
            ts = <int64_t>_be64(m + 6)
            tt = (attrs >> 3) & 1
            q = 14
        kl = <int32_t>_be32(m + q)
        q += 4
        if kl < -1:
            raise _errors.corrupt(_KIND_MSG, offset, f"invalid key length {kl}")
        if kl > size - q:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"key of {kl} bytes runs past the end of the message")
        k = m + q
        if kl > 0:
            q += kl
        if size - q < 4:
            raise _errors.corrupt(_KIND_MSG, offset, "value length runs past the end of the message")
        vl = <int32_t>_be32(m + q)
        q += 4
        if vl < -1:
            raise _errors.corrupt(_KIND_MSG, offset, f"invalid value length {vl}")
        if vl > size - q:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"value of {vl} bytes runs past the end of the message")
        v = m + q
        if vl > 0:
            q += vl
        if q != size:
            raise _errors.corrupt(_KIND_MSG, offset, f"{size - q} bytes follow the value")
        exact = _i128_add(delta, _i128(offset))
        if codec == 0:
            self.leaves += 1
            self.last_leaf = exact
            if not _i128_fits(exact):
                if self.leg_overflow is None:
                    self.leg_overflow = _i128_py(exact)
                return 0
            absolute = <int64_t>exact.lo
            if lat:
                ts = lat_ts
                tt = 1
            if absolute < self.start_offset:
                return 0
            if self.leg_kept == 0:
                self.leg_first = absolute
            self.leg_last = absolute
            self.leg_kept += 1
            if self.mode == MODE_RECORDS:
                self.out.append(_new_record(absolute, ts, tt, _bytes_or_none(k, kl),
                                            _bytes_or_none(v, vl), _EMPTY))
            elif self.mode == MODE_BATCHES:
                self.cur.append(_new_record(absolute, ts, tt, _bytes_or_none(k, kl),
                                            _bytes_or_none(v, vl), _EMPTY))
            elif self.mode == MODE_CONSUMER:
                self.consumer_record(absolute, ts, <object>tt, _bytes_or_none(k, kl),
                                     _bytes_or_none(v, vl), _EMPTY)
                self.has_end = True
                self.end_base = absolute
                self.end_delta = 0
            elif self.mode == MODE_MADE:
                self.made_record(absolute, ts, <object>tt, k, kl, v, vl, _EMPTY, stored)
            else:
                self.keep_record(absolute, ts, tt, self.seg_vbase + (k - self.seg_ptr), kl,
                                 self.seg_vbase + (v - self.seg_ptr), vl)
            return 0
        # A compressed wrapper: its value is a whole message set.
        if vl < 0:
            raise _errors.corrupt(_KIND_MSG, offset, "compressed wrapper message has a null value")
        if depth + 1 > self.max_depth:
            raise _errors.too_deep(depth + 1, self.max_depth, offset)
        inner = self.inflate(src, v - base, v - base + vl, codec, magic == 0)
        ip = <cptr>PyBytes_AS_STRING(inner)
        iend = PyBytes_GET_SIZE(inner)
        if magic == 1:
            # KIP-31: inner offsets are relative; the wrapper carries the absolute offset
            # of the last inner record.
            ipos = 0
            last_inner = _i128(offset)
            last_codec = 0
            while iend - ipos >= 12:
                isize = <int32_t>_be32(ip + ipos + 8)
                if isize < 0 or isize > iend - ipos - 12:
                    break
                last_inner = _i128(<int64_t>_be64(ip + ipos))
                last_codec = ip[ipos + 17] & 7 if isize >= 6 else 0
                ipos += 12 + isize
            if last_codec and ipos == iend:
                # The last entry is itself a wrapper (nested compression, which no Kafka
                # client writes): its last record, not its own offset, anchors the shift.
                # Decode the inner set once just to find that record (errors, if any,
                # are the ones the real walk below would raise first).
                sub = _decoder(MODE_RECORDS, INT64_MIN, self.check_crcs, self.max_depth,
                               self.max_size, True)
                sub.inner_set(inner, ip, iend, depth + 1, offset, _i128(0), False, 0)
                if sub.leaves:
                    last_inner = sub.last_leaf
            if (attrs >> 3) & 1 and not lat:
                # KIP-32: a LogAppendTime wrapper's timestamp applies to every inner record
                lat = True
                lat_ts = ts
            # A wrapper below its last inner offset has had none assigned (a client
            # builds it with offset 0): its inner offsets are kept, as the Python clients
            # and Java's read it, where the shift would make them negative.
            if not _i128_lt(_i128(offset), last_inner):
                delta = _i128_sub(exact, last_inner)
        if self.mode != MODE_VIEW:
            self.inner_set(inner, ip, iend, depth + 1, offset, delta, lat, lat_ts)
            return 0
        # The inner records are in the buffer inflate() just added, at the last base.
        outer_ptr = self.seg_ptr
        outer_vbase = self.seg_vbase
        self.seg_ptr = ip
        self.seg_vbase = <int64_t>self.bases[len(self.bases) - 1]
        try:
            self.inner_set(inner, ip, iend, depth + 1, offset, delta, lat, lat_ts)
        finally:
            self.seg_ptr = outer_ptr
            self.seg_vbase = outer_vbase
        return 0

    # ---- one magic 2 RecordBatch at base[pos:pos+total]; base holds n bytes ----
    cdef int batch(self, object src, cptr base, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t total,
                   int64_t base_offset) except -1:
        cdef cptr p = base + pos
        cdef uint32_t stored = _be32(p + 17)
        cdef uint32_t computed
        cdef int attrs = <int16_t>_be16(p + 21)
        cdef int codec = attrs & 7
        cdef bint lat = (attrs >> 3) & 1
        cdef bint control = (attrs >> 5) & 1
        cdef int64_t base_ts = <int64_t>_be64(p + 27)
        cdef int64_t max_ts = <int64_t>_be64(p + 35)
        cdef int32_t count = <int32_t>_be32(p + 57)
        cdef object inner = None
        cdef cptr r
        cdef Py_ssize_t rn, rlim, q, rec_end, rpos
        cdef int32_t k
        cdef int64_t h
        cdef uint64_t u = 0
        cdef int st
        cdef int64_t length, ts_delta, od, kl, vl, hcount, hkl, hvl
        cdef int64_t offset, ts
        cdef int tt = 1 if lat else 0
        cdef cptr kp
        cdef cptr vp
        cdef cptr hk
        cdef cptr hv
        cdef bint keep
        cdef bint emit = True
        cdef bint reached = False
        cdef object tto = tt  # MODE_CONSUMER: the timestamp type as a Python int, once
        cdef object headers
        cdef list hlist
        cdef object hkey = None
        cdef list records = None
        cdef bint fast = False
        cdef int64_t rbase = 0
        cdef Py_ssize_t room
        if self.check_crcs:
            # KIP-98: CRC32C covers everything from the attributes to the end of the batch
            computed = _crc32c(p + 21, total - 21)
            if computed != stored:
                raise _errors.crc_mismatch(_KIND_BATCH, base_offset, stored, computed)
        if count < 0:
            raise _errors.corrupt(_KIND_BATCH, base_offset, f"negative record count {count}")
        if control and (self.mode == MODE_VIEW or self.mode == MODE_CONSUMER or
                        ((self.mode == MODE_RECORDS or self.mode == MODE_MADE)
                         and not self.include_control)):
            emit = False  # still decoded, so bad control batches fail as in the twin
        if codec:
            inner = self.inflate(src, pos + 61, pos + total, codec, False)
            r = <cptr>PyBytes_AS_STRING(inner)
            rn = PyBytes_GET_SIZE(inner)
            rlim = rn
        else:
            r = p + 61
            rn = total - 61
            rlim = n - pos - 61  # field reads may run into the next entry; lengths catch it
        if self.mode == MODE_BATCHES:
            records = []
        elif self.mode == MODE_VIEW:
            # where r[0] is in the address space of the view's starts
            if codec:
                rbase = <int64_t>self.bases[len(self.bases) - 1]
            else:
                rbase = self.seg_vbase + (r - self.seg_ptr)
            # A kept record takes 7 bytes at least: room for all of them up front, and
            # _v2_run's offsets (base + an int32 delta) cannot leave int64.
            room = rn // 7 + 1
            self.grow(self.o.n + (count if count < room else room))
            fast = (-_FAST_BASE <= base_offset <= _FAST_BASE
                    and -_FAST_BASE <= base_ts <= _FAST_BASE)
        elif (self.mode == MODE_CONSUMER or self.mode == MODE_MADE) and emit:
            # Records of the common shape through _v2_run too: it keeps their fields'
            # spans (relative to r, rbase 0), made into records right after each run.
            # With consumer_record's own allocation, 22% fewer instructions per record
            # than the general loop and tp_new (callgrind, 100-byte values).
            room = rn // 7 + 1
            self.grow(count if count < room else room)
            fast = (-_FAST_BASE <= base_offset <= _FAST_BASE
                    and -_FAST_BASE <= base_ts <= _FAST_BASE)
        rpos = 0
        k = 0
        while k < count:
            if fast:
                rpos = _v2_run(r, rn, rlim, rpos, &k, count, base_offset, base_ts, max_ts,
                               lat, emit, self.start_offset, rbase, &self.o)
                if self.mode == MODE_CONSUMER and self.o.n:
                    reached = True
                    self.consumer_run(r, tto)
                elif self.mode == MODE_MADE and self.o.n:
                    self.made_run(r, tto)
                if k >= count:
                    break
            if rpos >= rn:
                break
            q = rpos
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            length = _zz32(u)
            if length < 0:
                raise _rec_corrupt(base_offset, k, f"negative length {length}")
            rec_end = q + length
            if rec_end > rn:
                raise _rec_corrupt(base_offset, k, f"length {length} runs past the end of the batch")
            q += 1  # attributes: unused (KIP-98)
            st = _rvar(r, rlim, &q, &u, 10)
            if st:
                raise _rec_error(base_offset, k, st, 10)
            ts_delta = _zz64(u)
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            od = _zz32(u)
            offset = <int64_t>(<uint64_t>base_offset + <uint64_t>od)
            st = _rspan(r, rlim, &q, rec_end, True, &kp, &kl)
            if st:
                raise _span_corrupt(base_offset, k, st, "key", kl)
            st = _rspan(r, rlim, &q, rec_end, True, &vp, &vl)
            if st:
                raise _span_corrupt(base_offset, k, st, "value", vl)
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            hcount = _zz32(u)
            keep = emit and offset >= self.start_offset
            headers = _EMPTY
            if hcount != 0:
                if hcount < 0:
                    raise _rec_corrupt(base_offset, k, f"negative header count {hcount}")
                hlist = [] if keep and self.mode != MODE_VIEW else None
                h = 0
                while h < hcount:
                    st = _rspan(r, rlim, &q, rec_end, False, &hk, &hkl)
                    if st:
                        raise _span_corrupt(base_offset, k, st, "header key", hkl)
                    if not _ascii(hk, hkl):
                        try:
                            hkey = PyUnicode_DecodeUTF8(<const char*>hk, hkl, NULL)
                        except UnicodeDecodeError:
                            raise _rec_corrupt(base_offset, k, "header key is not valid UTF-8") from None
                    elif hlist is not None:
                        hkey = PyUnicode_DecodeUTF8(<const char*>hk, hkl, NULL)
                    st = _rspan(r, rlim, &q, rec_end, True, &hv, &hvl)
                    if st:
                        raise _span_corrupt(base_offset, k, st, "header value", hvl)
                    if keep:
                        if hlist is not None:
                            hlist.append((hkey, _bytes_or_none(hv, hvl)))
                        else:
                            self.hgrow()
                            self.o.hks[self.o.nh] = rbase + (hk - r)
                            self.o.hkl[self.o.nh] = <int32_t>hkl
                            self.o.hvs[self.o.nh] = rbase + (hv - r)
                            self.o.hvl[self.o.nh] = <int32_t>hvl
                            self.o.nh += 1
                    h += 1
                if hlist is not None:
                    headers = tuple(hlist)
            if q != rec_end:
                raise _rec_corrupt(base_offset, k,
                                   f"its fields take {q - rec_end + length} of its {length} bytes")
            # Offsets and timestamps are int64 in Kafka: a sum outside it is corrupt data.
            if _add_overflows(base_offset, od):
                raise _rec_corrupt(base_offset, k,
                                   _outside_int64("offset", <object>base_offset + <object>od))
            if not lat and _add_overflows(base_ts, ts_delta):
                raise _rec_corrupt(base_offset, k,
                                   _outside_int64("timestamp", <object>base_ts + <object>ts_delta))
            rpos = rec_end
            k += 1
            if not keep:
                if offset >= self.start_offset:
                    reached = True  # a control batch's record: the position moves past it
                continue
            reached = True
            ts = max_ts if lat else <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
            if self.mode == MODE_RECORDS:
                self.out.append(_new_record(offset, ts, tt, _bytes_or_none(kp, kl),
                                            _bytes_or_none(vp, vl), headers))
            elif self.mode == MODE_CONSUMER:
                self.consumer_record(offset, ts, tto, _bytes_or_none(kp, kl),
                                     _bytes_or_none(vp, vl), headers)
            elif self.mode == MODE_MADE:
                self.made_record(offset, ts, tto, kp, kl, vp, vl, headers, -1)
            elif self.mode == MODE_BATCHES:
                records.append(_new_record(offset, ts, tt, _bytes_or_none(kp, kl),
                                           _bytes_or_none(vp, vl), headers))
            else:
                self.keep_record(offset, ts, tt, rbase + (kp - r), kl, rbase + (vp - r), vl)
        if k < count:
            raise _errors.corrupt(_KIND_BATCH, base_offset,
                                  f"holds {k} records, fewer than its record count {count}")
        if rpos != rn:
            raise _errors.corrupt(_KIND_BATCH, base_offset,
                                  f"{rn - rpos} bytes follow its {count} records")
        if self.mode == MODE_BATCHES and records:
            self.out.append(self.make_batch(p, base_offset, attrs, stored, records))
        elif reached and self.mode == MODE_CONSUMER:
            self.has_end = True
            self.end_base = base_offset
            self.end_delta = <int32_t>_be32(p + 23)
        return 0

    cdef inline int consumer_record(self, int64_t offset, int64_t ts, object tt, object key,
                                    object value, object headers) except -1:
        # Allocated as PyObject_GC_New does and filled here, not through the type's
        # tp_new: nothing zeroed, no None put in to be taken out again, and never
        # tracked by the cyclic GC (it holds bytes, str, None and tuples only; see
        # ConsumerRecord).
        cdef PyObject* o = _PyObject_GC_New(<PyTypeObject*>ConsumerRecord)
        cdef _CRFields* f = <_CRFields*>o
        if o == NULL:
            raise MemoryError()
        f.topic = <PyObject*>self.topic
        f.partition = <PyObject*>self.partition
        f.offset = offset
        f.timestamp = ts
        f.timestamp_type = <PyObject*>tt
        f.key = <PyObject*>key
        f.value = <PyObject*>value
        f.headers = <PyObject*>headers
        Py_INCREF(f.topic)
        Py_INCREF(f.partition)
        Py_INCREF(f.timestamp_type)
        Py_INCREF(f.key)
        Py_INCREF(f.value)
        Py_INCREF(f.headers)
        try:
            PyList_Append(self.out, o)
        finally:
            Py_DecRef(o)
        return 0

    cdef int consumer_run(self, cptr r, object tt) except -1:
        """The records _v2_run kept (spans into ``r``, no headers) as ConsumerRecords;
        empties the run's arrays."""
        cdef Py_ssize_t i
        cdef Py_ssize_t n = self.o.n
        for i in range(n):
            self.consumer_record(self.o.off[i], self.o.ts[i], tt,
                                 _bytes_or_none(r + self.o.ks[i], self.o.kl[i]),
                                 _bytes_or_none(r + self.o.vs[i], self.o.vl[i]), _EMPTY)
        self.o.n = 0
        return 0

    cdef int made_record(self, int64_t offset, int64_t ts, object tt, cptr kp, Py_ssize_t kl,
                         cptr vp, Py_ssize_t vl, object headers, int64_t crc) except -1:
        """One record made by the factory, unless it is below the position (then moved
        past it): a consumer's reading of records out of offset order.  ``crc``: the
        legacy message's own, -1 for a magic 2 record (its _FIELD_CRC is None)."""
        cdef PyObject* args[MAX_LAYOUT + 1]
        cdef Py_ssize_t i, n = self.nlayout
        cdef object key, value, o_offset, o_ts, o_ksize, o_vsize, made, ret
        cdef object o_crc = None
        cdef int code
        if offset < self.made_pos or self.made_end:
            return 0
        if offset == INT64_MAX:
            self.made_end = True
        else:
            self.made_pos = offset + 1
        key = _bytes_or_none(kp, kl)
        value = _bytes_or_none(vp, vl)
        o_offset = offset
        o_ts = ts
        o_ksize = kl
        o_vsize = vl
        if self.made_crc and crc >= 0:
            o_crc = crc
        for i in range(n):
            code = self.codes[i]
            if code < 0:
                args[i + 1] = PyTuple_GET_ITEM(self.layout, i)
            elif code == 0:
                args[i + 1] = <PyObject*>o_offset
            elif code == 1:
                args[i + 1] = <PyObject*>o_ts
            elif code == 2:
                args[i + 1] = <PyObject*>tt
            elif code == 3:
                args[i + 1] = <PyObject*>key
            elif code == 4:
                args[i + 1] = <PyObject*>value
            elif code == 5:
                args[i + 1] = <PyObject*>o_ksize
            elif code == 6:
                args[i + 1] = <PyObject*>o_vsize
            elif code == 7:
                args[i + 1] = <PyObject*>headers
            else:
                args[i + 1] = <PyObject*>o_crc
        if self.init is None:
            made = PyObject_Vectorcall(self.factory, &args[1],
                                       <size_t>n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
        else:
            # factory.__new__(factory) then init(made, *args): what calling the class
            # does, without building an argument tuple and looking __init__ up per record
            made = _kw_tp_new(self.factory, _EMPTY)
            args[0] = <PyObject*>made
            ret = PyObject_Vectorcall(self.init, args, <size_t>(n + 1), NULL)
            if ret is not None:
                raise TypeError(f"__init__() should return None, not '{type(ret).__name__}'")
        PyList_Append(self.out, <PyObject*>made)
        return 0

    cdef int made_run(self, cptr r, object tt) except -1:
        """The records _v2_run kept (spans into ``r``, no headers), made by the factory;
        empties the run's arrays."""
        cdef Py_ssize_t i
        cdef Py_ssize_t n = self.o.n
        self.o.n = 0  # first: the factory may raise
        for i in range(n):
            self.made_record(self.o.off[i], self.o.ts[i], tt, r + self.o.ks[i], self.o.kl[i],
                             r + self.o.vs[i], self.o.vl[i], _EMPTY, -1)
        return 0

    cdef Batch make_batch(self, cptr p, int64_t base_offset, int attrs, uint32_t stored,
                          list records):
        cdef Batch b = Batch.__new__(Batch)
        b.base_offset = base_offset
        b.magic = 2
        b.crc = stored
        b.attributes = attrs
        b.compression = attrs & 7
        b.timestamp_type = (attrs >> 3) & 1
        b.is_transactional = (attrs >> 4) & 1
        b.is_control = (attrs >> 5) & 1
        b.partition_leader_epoch = <int32_t>_be32(p + 12)
        b.last_offset_delta = <int32_t>_be32(p + 23)
        b.base_timestamp = <int64_t>_be64(p + 27)
        b.max_timestamp = <int64_t>_be64(p + 35)
        b.producer_id = <int64_t>_be64(p + 43)
        b.producer_epoch = <int16_t>_be16(p + 51)
        b.base_sequence = <int32_t>_be32(p + 53)
        b.records = records
        return b


cdef int _check_start(object start_offset) except -1:
    if not isinstance(start_offset, int):
        raise _errors.CodecError(
            f"start_offset must be an int (a Kafka offset), not {type(start_offset).__name__}")
    if not INT64_MIN <= start_offset <= INT64_MAX:
        raise _errors.CodecError(
            f"start_offset {start_offset} is outside the int64 range of Kafka offsets")
    return 0


cdef _Decoder _decoder(int mode, start_offset, check_crcs, max_depth, max_decompressed_size,
                       include_control):
    cdef _Decoder d = _Decoder.__new__(_Decoder)
    d.mode = mode
    d.start_offset = start_offset
    d.check_crcs = check_crcs
    d.max_depth = max_depth
    d.max_size = max_decompressed_size
    d.include_control = include_control
    d.out = []
    return d


cdef int _run(_Decoder d, object data) except -1:
    cdef Py_buffer view
    _getbuf(data, &view)
    try:
        d.top(data, <cptr>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


def decode_batches(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Every batch (magic 2) and top-level message (magic 0/1) in ``data``, as Batch objects."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_BATCHES, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    _run(d, data)
    return d.out


def decode_records(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, include_control=False):
    """Every record in ``data`` (control batches skipped unless ``include_control``)."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_RECORDS, start_offset, check_crcs, max_depth,
                               max_decompressed_size, include_control)
    _run(d, data)
    return d.out


def decode_consumer_records(data, topic, partition, *, start_offset=0, check_crcs=True,
                            max_depth=DEFAULT_MAX_DEPTH,
                            max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                            key_deserializer=None, value_deserializer=None):
    """``(records, next_offset)``: every record in ``data`` (control batches skipped) as a
    ConsumerRecord of ``topic`` and ``partition``, and the offset after the last batch (or
    legacy message) with records at or past ``start_offset``, control batches included
    (None when there is none).  Deserializers, if given, replace keys and values once
    every batch is decoded, in record order, keys first."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_CONSUMER, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    cdef ConsumerRecord r
    d.topic = topic
    d.partition = partition
    _run(d, data)
    if key_deserializer is not None or value_deserializer is not None:
        for r in d.out:
            if key_deserializer is not None:
                r.key = key_deserializer(r.key)
            if value_deserializer is not None:
                r.value = value_deserializer(r.value)
            PyObject_GC_Track(r)  # the results may be anything, cycles included
    if not d.has_end:
        return d.out, None
    return d.out, <object>d.end_base + d.end_delta + 1


# ---- records made by the caller's factory ------------------------------------------------

@cython.final
cdef class _RecordField:
    """One field of each record, as it goes into decode_records_with's ``layout`` (the
    _FIELD_* constants)."""

    cdef readonly str name
    cdef readonly int code

    def __repr__(self):
        return f"_RecordField({self.name!r})"


cdef _RecordField _record_field(str name, int code):
    cdef _RecordField f = _RecordField.__new__(_RecordField)
    f.name = name
    f.code = code
    return f


_FIELD_OFFSET = _record_field("offset", 0)
_FIELD_TIMESTAMP = _record_field("timestamp", 1)
_FIELD_TIMESTAMP_TYPE = _record_field("timestamp_type", 2)
_FIELD_KEY = _record_field("key", 3)
_FIELD_VALUE = _record_field("value", 4)
_FIELD_KEY_SIZE = _record_field("key_size", 5)  # the key's length in bytes, -1 for null
_FIELD_VALUE_SIZE = _record_field("value_size", 6)
_FIELD_HEADERS = _record_field("headers", 7)
_FIELD_CRC = _record_field("crc", 8)  # a magic 0/1 message's own CRC; None in magic 2


def decode_records_with(data, factory, layout, *, init=None, start_offset=0, check_crcs=True,
                         max_depth=DEFAULT_MAX_DEPTH,
                         max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                         include_control=False):
    """Every record in ``data`` (MessageSets and RecordBatches, any codec) made as your own
    record type, straight from the bytes, with no :class:`Record` in between.

    Each record is ``factory(*args)``, where ``args`` is ``layout`` (a tuple of at most 32
    items) with every ``FIELD_*`` item replaced by that field of the record; other items
    are passed as they are::

        Row = collections.namedtuple("Row", "topic offset key value")
        rows = codec.decode_records_with(data, Row, ("orders", codec.FIELD_OFFSET,
                                                     codec.FIELD_KEY, codec.FIELD_VALUE))

    With ``init``, ``factory`` must be a class and a record is made as
    ``factory.__new__(factory)`` followed by ``init(record, *args)`` (for a class whose
    ``__init__`` is ``init``: what calling the class does, only faster).

    Records are read as a consumer fetching at ``start_offset`` reads them: one whose
    offset is below the position (``start_offset`` at first, then just past each record
    made) is left out, as are control batches unless ``include_control`` and a partial
    batch at the end of ``data`` (as a fetch response may hold).  Raises
    :class:`kafkawire.errors.CodecError` (or a subclass) for a bad layout or factory and for
    corrupt or unreadable data, as :func:`decode_records` does; an exception the factory
    raises comes out as it is.  ``check_crcs``, ``max_depth`` and ``max_decompressed_size``
    are :func:`decode_batches`' own."""
    _check_start(start_offset)
    _check_layout(factory, layout, init)
    cdef _Decoder d = _decoder(MODE_MADE, start_offset, check_crcs, max_depth,
                               max_decompressed_size, include_control)
    cdef Py_ssize_t i
    cdef object item
    d.factory = factory
    d.init = init
    d.layout = layout
    d.nlayout = PyTuple_GET_SIZE(layout)
    for i in range(d.nlayout):
        item = layout[i]
        d.codes[i] = (<_RecordField>item).code if type(item) is _RecordField else -1
        d.made_crc = d.made_crc or d.codes[i] == 8
    d.made_pos = start_offset
    _run(d, data)
    return d.out


cdef int _check_layout(object factory, object layout, object init) except -1:
    if type(layout) is not tuple:
        raise _errors.CodecError(f"layout must be a tuple, not {type(layout).__name__}")
    if PyTuple_GET_SIZE(layout) > MAX_LAYOUT:
        raise _errors.CodecError(
            f"layout has {PyTuple_GET_SIZE(layout)} items; a factory takes at most {MAX_LAYOUT}")
    if not callable(factory):
        raise _errors.CodecError(f"factory must be callable, not {type(factory).__name__}")
    if init is not None and not (isinstance(factory, type) and callable(init)):
        raise _errors.CodecError("init needs a class as factory and a callable init")
    return 0
