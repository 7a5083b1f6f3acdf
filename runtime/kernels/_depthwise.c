/* Depthwise convolution sums (one filter per channel) in 8-lane AVX2 multiply-adds.
 *
 * numpy can only sum a depthwise convolution's taps a pass at a time over a whole chunk of
 * rows (one einsum per column phase, then the bias), from a padded copy of the input: 3-9 ns an
 * output value on EfficientNetB0's layers on the 2-core machine measured. Here each output
 * value is summed in registers, its taps read straight from the unpadded input (taps that fall
 * in the padding are left out).
 *
 * runtime/kernels/nn_ops_depthwise.py (DepthwiseTaps) is the only caller. It packs the filter
 * by blocks of 8 channels, [ceil(C / 8), kh * kw, 8], and the bias to ceil(C / 8) * 8 values,
 * zero past C.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))
#define MAX_TAPS 1024 /* nn_ops_depthwise.COMPILED_MAX_TAPS: larger filters run in numpy */
#define PIXELS 4 /* output columns summed together: independent chains for the FMA latency */

/* The taps that an output pixel reads: their offsets in floats from its first input row and
 * column read, and their numbers in the filter (i * kw + j). */
typedef struct {
    Py_ssize_t count;
    Py_ssize_t offsets[MAX_TAPS];
    Py_ssize_t number[MAX_TAPS];
} Taps;

typedef struct {
    const float *x; /* one image, [h, w, c] */
    Py_ssize_t h, w, c;
    const float *packed, *bias; /* bias may be NULL */
    Py_ssize_t kh, kw, sh, sw, dh, dw, pad_top, pad_left;
    int lanes[8]; /* the lanes of the last block of channels, when c is no multiple of 8 */
} Conv;

/* Sums `count` output pixels, `step` floats apart in the input, for the 8 channels from
 * `first` (only the lanes in the mask when `masked`). */
AVX2 INLINE void block(const Conv *cv, const float *in, Py_ssize_t step, float *out,
                       Py_ssize_t first, const Taps *t, const int count, const int masked) {
    const float *taps = cv->packed + first * cv->kh * cv->kw;
    __m256i mask = _mm256_setzero_si256();
    if (masked) mask = _mm256_loadu_si256((const __m256i *)cv->lanes);
    __m256 sums[PIXELS];
    __m256 start = cv->bias ? _mm256_loadu_ps(cv->bias + first) : _mm256_setzero_ps();
    for (int k = 0; k < count; k++) sums[k] = start;
    in += first;
    for (Py_ssize_t n = 0; n < t->count; n++) {
        __m256 w = _mm256_loadu_ps(taps + 8 * t->number[n]);
        const float *p = in + t->offsets[n];
        for (int k = 0; k < count; k++) {
            __m256 v = masked ? _mm256_maskload_ps(p + k * step, mask)
                              : _mm256_loadu_ps(p + k * step);
            sums[k] = _mm256_fmadd_ps(v, w, sums[k]);
        }
    }
    for (int k = 0; k < count; k++) {
        if (masked)
            _mm256_maskstore_ps(out + k * cv->c + first, mask, sums[k]);
        else
            _mm256_storeu_ps(out + k * cv->c + first, sums[k]);
    }
}

/* Every channel of `count` output pixels whose first read is `in`. */
AVX2 INLINE void pixels(const Conv *cv, const float *in, float *out, const Taps *t,
                        const int count) {
    Py_ssize_t c = cv->c, step = cv->sw * c, full = c / 8 * 8;
    for (Py_ssize_t first = 0; first < full; first += 8)
        block(cv, in, step, out, first, t, count, 0);
    if (full < c) block(cv, in, step, out, full, t, count, 1);
}

/* The full blocks of channels of TILE neighbouring output pixels that read every column of
 * filter rows [i0, i1), for a filter KW wide at column stride SW and dilation 1: each input
 * column is loaded once for all the pixels and taps that read it, where `block` loads it once
 * for each. (On this CPU, loads rather than multiply-adds bound the sums.) */
#define TILE 8
AVX2 INLINE void tile(const Conv *cv, const float *in, float *out, Py_ssize_t i0, Py_ssize_t i1,
                      const int KW, const int SW) {
    Py_ssize_t c = cv->c, full = c / 8 * 8, row_step = cv->dh * cv->w * c;
    for (Py_ssize_t first = 0; first < full; first += 8) {
        const float *taps = cv->packed + first * cv->kh * KW;
        __m256 start = cv->bias ? _mm256_loadu_ps(cv->bias + first) : _mm256_setzero_ps();
        __m256 sums[TILE];
        for (int k = 0; k < TILE; k++) sums[k] = start;
        const float *row = in + first;
        for (Py_ssize_t i = i0; i < i1; i++, row += row_step) {
            __m256 w[KW];
            for (int j = 0; j < KW; j++) w[j] = _mm256_loadu_ps(taps + 8 * (i * KW + j));
#pragma GCC unroll 32
            for (int col = 0; col < (TILE - 1) * SW + KW; col++) {
                __m256 v = _mm256_loadu_ps(row + col * c);
#pragma GCC unroll 8
                for (int k = 0; k < TILE; k++) {
                    int j = col - k * SW;
                    if (j >= 0 && j < KW) sums[k] = _mm256_fmadd_ps(v, w[j], sums[k]);
                }
            }
        }
        for (int k = 0; k < TILE; k++) _mm256_storeu_ps(out + k * c + first, sums[k]);
    }
}

/* TILE pixels by `tile` where it has a form for the filter width and stride, else false. */
AVX2 static int tiled(const Conv *cv, const float *in, float *out, Py_ssize_t i0, Py_ssize_t i1,
                      const Taps *t) {
    if (cv->dw != 1) return 0;
    if (cv->kw == 3 && cv->sw == 1) tile(cv, in, out, i0, i1, 3, 1);
    else if (cv->kw == 3 && cv->sw == 2) tile(cv, in, out, i0, i1, 3, 2);
    else if (cv->kw == 5 && cv->sw == 1) tile(cv, in, out, i0, i1, 5, 1);
    else if (cv->kw == 5 && cv->sw == 2) tile(cv, in, out, i0, i1, 5, 2);
    else return 0;
    Py_ssize_t c = cv->c, full = c / 8 * 8;
    if (full < c)
        for (int k = 0; k < TILE; k++)
            block(cv, in + k * cv->sw * c, 0, out + k * c, full, t, 1, 1);
    return 1;
}

/* The taps of filter rows [i0, i1) and columns [j0, j1), from the read of (i0, j0). */
static void taps_of(const Conv *cv, Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t j0, Py_ssize_t j1,
                    Taps *t) {
    t->count = 0;
    for (Py_ssize_t i = i0; i < i1; i++)
        for (Py_ssize_t j = j0; j < j1; j++) {
            t->offsets[t->count] = ((i - i0) * cv->dh * cv->w + (j - j0) * cv->dw) * cv->c;
            t->number[t->count++] = i * cv->kw + j;
        }
}

/* [first, end) of the filter positions k whose input index at + k * d lies in [0, size). */
static void valid(Py_ssize_t at, Py_ssize_t d, Py_ssize_t taps, Py_ssize_t size,
                  Py_ssize_t *first, Py_ssize_t *end) {
    Py_ssize_t lo = at >= 0 ? 0 : (-at + d - 1) / d;
    Py_ssize_t hi = at > size - 1 ? 0 : (size - 1 - at) / d + 1;
    *first = lo;
    *end = hi < taps ? hi : taps;
    if (*end < *first) *end = *first;
}

AVX2 static void sum_rows(const Conv *cv, float *out, Py_ssize_t first_row, Py_ssize_t rows,
                          Py_ssize_t width, Taps *inner, Taps *edge) {
    Py_ssize_t c = cv->c;
    for (Py_ssize_t r = 0; r < rows; r++) {
        Py_ssize_t top = (first_row + r) * cv->sh - cv->pad_top, i0, i1;
        valid(top, cv->dh, cv->kh, cv->h, &i0, &i1);
        /* A row of taps wholly in the padding still reads no input: its first read is then
         * never dereferenced. */
        const float *row = cv->x + (i1 > i0 ? (top + i0 * cv->dh) * cv->w * c : 0);
        float *orow = out + r * width * c;
        taps_of(cv, i0, i1, 0, cv->kw, inner);
        Py_ssize_t x = 0;
        while (x < width) {
            Py_ssize_t left = x * cv->sw - cv->pad_left, j0, j1;
            valid(left, cv->dw, cv->kw, cv->w, &j0, &j1);
            if (j0 == 0 && j1 == cv->kw) {
                /* Inside: TILE or PIXELS at a time while the last of them is inside too. */
                Py_ssize_t last = x + TILE - 1;
                if (last < width && last * cv->sw - cv->pad_left + (cv->kw - 1) * cv->dw < cv->w &&
                    tiled(cv, row + left * c, orow + x * c, i0, i1, inner)) {
                    x += TILE;
                    continue;
                }
                last = x + PIXELS - 1;
                if (last < width && last * cv->sw - cv->pad_left + (cv->kw - 1) * cv->dw < cv->w) {
                    pixels(cv, row + left * c, orow + x * c, inner, PIXELS);
                    x += PIXELS;
                } else {
                    pixels(cv, row + left * c, orow + x * c, inner, 1);
                    x += 1;
                }
            } else {
                taps_of(cv, i0, i1, j0, j1, edge);
                const float *in = j1 > j0 ? row + (left + j0 * cv->dw) * c : row;
                pixels(cv, in, orow + x * c, edge, 1);
                x += 1;
            }
        }
    }
}

static int get_float32(PyObject *obj, Py_buffer *view, int writable, int ndim, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    const char *format = view->format;
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
    if (view->itemsize != 4 || strcmp(format, "f") != 0 || view->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must be a %d-d float32 array", what, ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* sums(image, packed, bias_or_None, out, first_row, (sh, sw), (kh, kw), (dh, dw),
 *      (pad_top, pad_left)):
 * out[r, x, ch] = bias[ch] + sum over the taps i, j inside the image of
 *     image[(first_row + r) * sh + i * dh - pad_top, x * sw + j * dw - pad_left, ch]
 *     * filter[i, j, ch]
 * image [h, w, C] and out [rows, width, C], every array C-contiguous. */
static PyObject *sums(PyObject *self, PyObject *args) {
    PyObject *x_obj, *packed_obj, *bias_obj, *out_obj;
    Py_ssize_t first_row, sh, sw, kh, kw, dh, dw, pad_top, pad_left;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOn(nn)(nn)(nn)(nn)", &x_obj, &packed_obj, &bias_obj,
                          &out_obj, &first_row, &sh, &sw, &kh, &kw, &dh, &dw, &pad_top,
                          &pad_left))
        return NULL;
    Py_buffer x, packed, bias, out;
    int have_bias = bias_obj != Py_None;
    if (get_float32(x_obj, &x, 0, 3, "image") < 0) return NULL;
    if (get_float32(packed_obj, &packed, 0, 3, "packed filter") < 0) goto release_x;
    if (have_bias && get_float32(bias_obj, &bias, 0, 1, "packed bias") < 0) goto release_packed;
    if (get_float32(out_obj, &out, 1, 3, "output") < 0) goto release_bias;

    Py_ssize_t rows = out.shape[0], width = out.shape[1], c = out.shape[2];
    Py_ssize_t blocks = (c + 7) / 8;
    const char *problem = NULL;
    if (x.shape[2] != c)
        problem = "image and output channels differ";
    else if (first_row < 0 || sh < 1 || sw < 1 || kh < 1 || kw < 1 || dh < 1 || dw < 1 ||
             kh * kw > MAX_TAPS || pad_top < 0 || pad_left < 0)
        problem = "bad window";
    else if (packed.shape[0] != blocks || packed.shape[1] != kh * kw || packed.shape[2] != 8)
        problem = "packed filter has the wrong shape";
    else if (have_bias && bias.shape[0] != 8 * blocks)
        problem = "packed bias has the wrong length";
    if (problem) {
        PyErr_SetString(PyExc_ValueError, problem);
        PyBuffer_Release(&out);
        goto release_bias;
    }
    if (rows > 0 && width > 0 && c > 0) {
        Conv cv = {x.buf, x.shape[0], x.shape[1], c, packed.buf, have_bias ? bias.buf : NULL,
                   kh, kw, sh, sw, dh, dw, pad_top, pad_left, {0}};
        for (int k = 0; k < 8; k++) cv.lanes[k] = k < c % 8 ? -1 : 0;
        Taps *taps = PyMem_RawMalloc(2 * sizeof(Taps));
        if (taps == NULL) {
            PyErr_NoMemory();
            PyBuffer_Release(&out);
            goto release_bias;
        }
        Py_BEGIN_ALLOW_THREADS
        sum_rows(&cv, out.buf, first_row, rows, width, taps, taps + 1);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(taps);
    }
    PyBuffer_Release(&out);
    if (have_bias) PyBuffer_Release(&bias);
    PyBuffer_Release(&packed);
    PyBuffer_Release(&x);
    Py_RETURN_NONE;

release_bias:
    if (have_bias) PyBuffer_Release(&bias);
release_packed:
    PyBuffer_Release(&packed);
release_x:
    PyBuffer_Release(&x);
    return NULL;
}

static PyObject *supported(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    __builtin_cpu_init();
    return PyBool_FromLong(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
}

static PyMethodDef methods[] = {
    {"sums", sums, METH_VARARGS, "Depthwise convolution sums of output rows of one image."},
    {"supported", supported, METH_NOARGS, "Whether this CPU has the AVX2 and FMA it needs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_depthwise", "Depthwise convolution sums in AVX2.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__depthwise(void) { return PyModule_Create(&module); }
