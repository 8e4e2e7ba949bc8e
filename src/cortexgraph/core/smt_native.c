/* The chunked SMT's bulk update and bulk build in C, for stores that hash with BLAKE3, with
 * the two other pieces of the core that run here when the compiled modules run: BLAKE3 of
 * one chunk (``core.hashing``) and the term and frequency columns of a keyword segment's
 * postings (``core.segments.Postings.from_docs``). Each has its Python form as reference.
 *
 * This is the same algorithm as ``cortexgraph.core.smt_apply`` (the reference, which the
 * pure-Python build runs and the tests compare this with byte for byte), on the layout of
 * ``cortexgraph.core.smt_store``: a chunk is the top four levels of a subtree, 16 slots
 * (EMPTY, LEAF: key and value hash inline, CHILD: the child chunk's hash) below 15 interior
 * nodes, stored as a 4-byte header (the CHILD and the LEAF bitmaps), the hashes of the
 * interior nodes that hold two or more keys in heap order, then the slots in slot order.
 *
 * Nothing here decides what is damage: a row that is not exactly what the layout allows
 * (missing, malformed, a hash that does not match its parent's slot, a leaf off its path)
 * makes a call return ``None``, and the caller runs the Python reference on the same
 * input, which raises the error that names it. Rows are read through the caller's ``get``
 * and the rows to write go into the caller's dict, as in the reference.
 *
 * BLAKE3 is written here from its specification for inputs of at most one chunk (1,024
 * bytes): every input hashed here is 65 bytes (a node or a leaf). The tests compare it with
 * the ``blake3`` package on inputs of every length up to 1,024.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------ BLAKE3 */

static const uint32_t IV[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                               0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};
static const uint8_t PERMUTATION[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};

enum { CHUNK_START = 1, CHUNK_END = 2, ROOT = 8, BLOCK = 64, CHUNK = 1024 };

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store32(uint8_t *p, uint32_t x) {
    p[0] = (uint8_t)x;
    p[1] = (uint8_t)(x >> 8);
    p[2] = (uint8_t)(x >> 16);
    p[3] = (uint8_t)(x >> 24);
}

#define G(a, b, c, d, x, y)                 \
    do {                                    \
        s[a] = s[a] + s[b] + (x);           \
        s[d] = rotr(s[d] ^ s[a], 16);       \
        s[c] = s[c] + s[d];                 \
        s[b] = rotr(s[b] ^ s[c], 12);       \
        s[a] = s[a] + s[b] + (y);           \
        s[d] = rotr(s[d] ^ s[a], 8);        \
        s[c] = s[c] + s[d];                 \
        s[b] = rotr(s[b] ^ s[c], 7);        \
    } while (0)

/* The compression function with chunk counter 0: ``cv`` becomes the first eight words of
 * its output (the next chaining value, or the hash when ``flags`` has ROOT). */
static void compress(uint32_t cv[8], const uint8_t block[BLOCK], uint32_t length, uint32_t flags) {
    uint32_t m[16], t[16], s[16];
    for (int i = 0; i < 16; i++) m[i] = load32(block + 4 * i);
    for (int i = 0; i < 8; i++) s[i] = cv[i];
    s[8] = IV[0], s[9] = IV[1], s[10] = IV[2], s[11] = IV[3];
    s[12] = 0, s[13] = 0, s[14] = length, s[15] = flags;
    for (int round = 0; round < 7; round++) {
        G(0, 4, 8, 12, m[0], m[1]);
        G(1, 5, 9, 13, m[2], m[3]);
        G(2, 6, 10, 14, m[4], m[5]);
        G(3, 7, 11, 15, m[6], m[7]);
        G(0, 5, 10, 15, m[8], m[9]);
        G(1, 6, 11, 12, m[10], m[11]);
        G(2, 7, 8, 13, m[12], m[13]);
        G(3, 4, 9, 14, m[14], m[15]);
        if (round < 6) {
            for (int i = 0; i < 16; i++) t[i] = m[PERMUTATION[i]];
            memcpy(m, t, sizeof m);
        }
    }
    for (int i = 0; i < 8; i++) cv[i] = s[i] ^ s[i + 8];
}

/* BLAKE3-256 of ``data`` (``length`` <= CHUNK): the one chunk is the root. */
static void blake3_small(const uint8_t *data, size_t length, uint8_t out[32]) {
    uint32_t cv[8];
    uint32_t start = CHUNK_START;
    uint8_t last[BLOCK];
    memcpy(cv, IV, sizeof cv);
    while (length > BLOCK) {
        compress(cv, data, BLOCK, start);
        start = 0;
        data += BLOCK;
        length -= BLOCK;
    }
    memset(last, 0, sizeof last);
    memcpy(last, data, length);
    compress(cv, last, (uint32_t)length, start | CHUNK_END | ROOT);
    for (int i = 0; i < 8; i++) store32(out + 4 * i, cv[i]);
}

/* ------------------------------------------------------------------ SMT: the layout */

enum { EMPTY = 0, ONE = 1, INNER = 2 };
enum { DIGEST = 32, KEY = 32, LEAF = 64, HEADER = 4, MAX_DEPTH = 252 };
enum { OK = 0, FAILED = -1, FALLBACK = -2 }; /* FAILED: a Python error is set */

static const uint8_t ZERO[DIGEST] = {0};

/* The state of a subtree as the recursion passes it: EMPTY; ONE (``a`` the key, ``b`` the
 * value hash); INNER (a chunk at this position, ``a`` its hash). */
typedef struct {
    uint8_t kind;
    uint8_t a[32];
    uint8_t b[32];
} State;

/* A chunk, decoded: the kind of nodes 1..31 (slot s is node 16 + s), the hash of each
 * INNER node (interior nodes: their cached hash; slots: the child chunk's hash), the bytes
 * of each LEAF slot, and for an interior ONE node the slot of its lone leaf. */
typedef struct {
    uint8_t kind[32];
    uint8_t lone[16];
    uint8_t hash[32][DIGEST];
    uint8_t leaf[16][LEAF];
} Chunk;

static void hash_node(const uint8_t *left, const uint8_t *right, uint8_t out[DIGEST]) {
    uint8_t buf[1 + 2 * DIGEST];
    buf[0] = 1;
    memcpy(buf + 1, left, DIGEST);
    memcpy(buf + 1 + DIGEST, right, DIGEST);
    blake3_small(buf, sizeof buf, out);
}

static void hash_leaf(const uint8_t *key_value, uint8_t out[DIGEST]) {
    uint8_t buf[1 + LEAF];
    buf[0] = 0;
    memcpy(buf + 1, key_value, LEAF);
    blake3_small(buf, sizeof buf, out);
}

static inline int nibble(const uint8_t *key, int depth) {
    return key[depth >> 3] >> (4 - (depth & 4)) & 0xF;
}

/* The row key of the chunk at ``depth`` on the path of ``key`` (``core.smt_store.chunk_key``). */
static PyObject *chunk_key(int depth, const uint8_t *key) {
    uint8_t buf[1 + KEY];
    int n = depth >> 3;
    Py_ssize_t size = 1 + n;
    buf[0] = (uint8_t)(depth >> 2);
    memcpy(buf + 1, key, (size_t)n);
    if (depth & 4) buf[size++] = key[n] & 0xF0;
    return PyBytes_FromStringAndSize((const char *)buf, size);
}

/* The kinds of the interior nodes from the slots' (``core.roots``' rules: two empty
 * children make an empty node, an empty and a lone leaf pass the leaf up, anything else
 * is an inner node). */
static void derive_kinds(Chunk *c) {
    for (int n = 15; n >= 1; n--) {
        int l = c->kind[2 * n], r = c->kind[2 * n + 1];
        if (l == EMPTY && r == EMPTY) {
            c->kind[n] = EMPTY;
        } else if (l == EMPTY || r == EMPTY) {
            int child = l == EMPTY ? 2 * n + 1 : 2 * n;
            c->kind[n] = c->kind[child];
            if (c->kind[n] == ONE) c->lone[n] = child >= 16 ? (uint8_t)(child - 16) : c->lone[child];
        } else {
            c->kind[n] = INNER;
        }
    }
}

static void bitmaps(const Chunk *c, unsigned *children, unsigned *leaves) {
    *children = *leaves = 0;
    for (int s = 0; s < 16; s++) {
        if (c->kind[16 + s] == INNER) *children |= 0x8000u >> s;
        if (c->kind[16 + s] == ONE) *leaves |= 0x8000u >> s;
    }
}

/* Decode the stored chunk ``enc`` at ``depth`` whose hash must be ``expect``: FALLBACK on
 * anything ``core.smt_store.read_chunk`` refuses. */
static int decode_chunk(const uint8_t *enc, Py_ssize_t size, int depth, const uint8_t *expect,
                        Chunk *c) {
    if (size < HEADER + DIGEST) return FALLBACK;
    unsigned children = (unsigned)enc[0] << 8 | enc[1];
    unsigned leaves = (unsigned)enc[2] << 8 | enc[3];
    if (children & leaves) return FALLBACK;
    if (children && depth == MAX_DEPTH) return FALLBACK;
    for (int s = 0; s < 16; s++) {
        unsigned bit = 0x8000u >> s;
        c->kind[16 + s] = children & bit ? INNER : leaves & bit ? ONE : EMPTY;
    }
    derive_kinds(c);
    if (c->kind[1] != INNER) return FALLBACK;
    int inners = 0;
    for (int n = 1; n < 16; n++) inners += c->kind[n] == INNER;
    Py_ssize_t want = HEADER + (Py_ssize_t)DIGEST * (inners + __builtin_popcount(children)) +
                      (Py_ssize_t)LEAF * __builtin_popcount(leaves);
    if (size != want) return FALLBACK;
    if (memcmp(enc + HEADER, expect, DIGEST) != 0) return FALLBACK;
    const uint8_t *at = enc + HEADER;
    for (int n = 1; n < 16; n++) {
        if (c->kind[n] == INNER) {
            memcpy(c->hash[n], at, DIGEST);
            at += DIGEST;
        }
    }
    for (int s = 0; s < 16; s++) {
        if (c->kind[16 + s] == INNER) {
            memcpy(c->hash[16 + s], at, DIGEST);
            at += DIGEST;
        } else if (c->kind[16 + s] == ONE) {
            memcpy(c->leaf[s], at, LEAF);
            at += LEAF;
        }
    }
    return OK;
}

/* The hash of node n (1..31) as its parent hashes it. */
static const uint8_t *node_hash(const Chunk *c, int n, uint8_t scratch[DIGEST]) {
    if (c->kind[n] == INNER) return c->hash[n];
    hash_leaf(c->leaf[n >= 16 ? n - 16 : c->lone[n]], scratch);
    return scratch;
}

/* Recompute the interior nodes with a bit in ``dirty`` (bit n: node n has a changed slot
 * below), children first; the others keep their cached hash. */
static void rehash(Chunk *c, unsigned dirty) {
    derive_kinds(c);
    for (int n = 15; n >= 1; n--) {
        if (!(dirty >> n & 1) || c->kind[n] != INNER) continue;
        int l = 2 * n, r = 2 * n + 1;
        uint8_t a[DIGEST], b[DIGEST];
        if (c->kind[l] == EMPTY) {
            hash_node(ZERO, c->hash[r], c->hash[n]); /* the other side is inner */
        } else if (c->kind[r] == EMPTY) {
            hash_node(c->hash[l], ZERO, c->hash[n]);
        } else {
            const uint8_t *hl = node_hash(c, l, a);
            const uint8_t *hr = node_hash(c, r, b);
            hash_node(hl, hr, c->hash[n]);
        }
    }
}

/* The bytes of chunk ``c`` (its kinds derived). */
static PyObject *encode_chunk(const Chunk *c) {
    unsigned children, leaves;
    bitmaps(c, &children, &leaves);
    int inners = 0;
    for (int n = 1; n < 16; n++) inners += c->kind[n] == INNER;
    Py_ssize_t size = HEADER + (Py_ssize_t)DIGEST * (inners + __builtin_popcount(children)) +
                      (Py_ssize_t)LEAF * __builtin_popcount(leaves);
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    uint8_t *at = (uint8_t *)PyBytes_AS_STRING(out);
    at[0] = (uint8_t)(children >> 8), at[1] = (uint8_t)children;
    at[2] = (uint8_t)(leaves >> 8), at[3] = (uint8_t)leaves;
    at += HEADER;
    for (int n = 1; n < 16; n++) {
        if (c->kind[n] == INNER) {
            memcpy(at, c->hash[n], DIGEST);
            at += DIGEST;
        }
    }
    for (int s = 0; s < 16; s++) {
        if (c->kind[16 + s] == INNER) {
            memcpy(at, c->hash[16 + s], DIGEST);
            at += DIGEST;
        } else if (c->kind[16 + s] == ONE) {
            memcpy(at, c->leaf[s], LEAF);
            at += LEAF;
        }
    }
    return out;
}

/* writes[chunk key of ``key`` at ``depth``] = value (None: delete the row). */
static int put_row(PyObject *writes, int depth, const uint8_t *key, PyObject *value) {
    PyObject *row = chunk_key(depth, key);
    if (row == NULL) return FAILED;
    int rc = PyDict_SetItem(writes, row, value);
    Py_DECREF(row);
    return rc < 0 ? FAILED : OK;
}

/* Hash the nodes of ``c`` with a bit in ``dirty`` again, and write the chunk as the row at
 * ``depth`` on ``key``'s path; its hash (node 1) goes to ``out``. */
static int put_chunk(PyObject *writes, int depth, const uint8_t *key, Chunk *c, unsigned dirty,
                     uint8_t out[DIGEST]) {
    rehash(c, dirty);
    PyObject *enc = encode_chunk(c);
    if (enc == NULL) return FAILED;
    int rc = put_row(writes, depth, key, enc);
    Py_DECREF(enc);
    if (rc == OK) memcpy(out, c->hash[1], DIGEST);
    return rc;
}

static unsigned ancestors(int slot) {
    unsigned mask = 0;
    for (int n = (16 + slot) >> 1; n >= 1; n >>= 1) mask |= 1u << n;
    return mask;
}

static void slot_state(const Chunk *c, int s, State *out) {
    out->kind = c->kind[16 + s];
    if (out->kind == INNER) {
        memcpy(out->a, c->hash[16 + s], DIGEST);
    } else if (out->kind == ONE) {
        memcpy(out->a, c->leaf[s], KEY);
        memcpy(out->b, c->leaf[s] + KEY, DIGEST);
    }
}

static void set_slot(Chunk *c, int s, const State *state) {
    c->kind[16 + s] = state->kind;
    if (state->kind == INNER) {
        memcpy(c->hash[16 + s], state->a, DIGEST);
    } else if (state->kind == ONE) {
        memcpy(c->leaf[s], state->a, KEY);
        memcpy(c->leaf[s] + KEY, state->b, DIGEST);
    }
}

static int same_state(const State *x, const State *y) {
    if (x->kind != y->kind) return 0;
    if (x->kind == EMPTY) return 1;
    if (memcmp(x->a, y->a, 32) != 0) return 0;
    return x->kind == INNER || memcmp(x->b, y->b, 32) == 0;
}

/* ------------------------------------------------------------- SMT: the bulk update */

typedef struct {
    PyObject *get;    /* row key -> bytes or None */
    PyObject *items;  /* list of (key, value hash or None), sorted by key */
    PyObject *writes; /* row key -> bytes, or None to delete */
    long long delta;  /* keys added less keys removed */
} Apply;

static inline const uint8_t *item_key(const Apply *run, Py_ssize_t i) {
    return (const uint8_t *)PyBytes_AS_STRING(PyTuple_GET_ITEM(PyList_GET_ITEM(run->items, i), 0));
}

/* The value hash of item i, or NULL for a delete. */
static inline const uint8_t *item_value(const Apply *run, Py_ssize_t i) {
    PyObject *value = PyTuple_GET_ITEM(PyList_GET_ITEM(run->items, i), 1);
    return value == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(value);
}


/* Read and decode the chunk at ``depth`` on ``key``'s path, whose hash is ``expect``. */
static int read_chunk(Apply *run, int depth, const uint8_t *key, const uint8_t *expect, Chunk *c) {
    PyObject *row = chunk_key(depth, key);
    if (row == NULL) return FAILED;
    PyObject *enc = PyObject_CallOneArg(run->get, row);
    Py_DECREF(row);
    if (enc == NULL) return FAILED;
    int rc = FALLBACK; /* missing, or of another type: the reference says which */
    if (PyBytes_Check(enc)) {
        rc = decode_chunk((const uint8_t *)PyBytes_AS_STRING(enc), PyBytes_GET_SIZE(enc), depth,
                          expect, c);
    } else if (PyByteArray_Check(enc) || PyMemoryView_Check(enc)) { /* as the reference takes */
        Py_buffer view;
        if (PyObject_GetBuffer(enc, &view, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
        } else {
            rc = decode_chunk((const uint8_t *)view.buf, view.len, depth, expect, c);
            PyBuffer_Release(&view);
        }
    }
    Py_DECREF(enc);
    return rc;
}

static int update_chunk(Apply *run, int depth, State *state, Py_ssize_t lo, Py_ssize_t hi,
                        Chunk *c);

/* Apply items [lo, hi) (all below one ``depth``-bit prefix) to the subtree ``state`` at
 * ``depth``, which becomes the new state (``core.smt_apply._Apply.subtree``). */
static int subtree(Apply *run, int depth, State *state, Py_ssize_t lo, Py_ssize_t hi) {
    if (state->kind != INNER && hi - lo == 1) { /* one update, at most one key here */
        const uint8_t *key = item_key(run, lo);
        const uint8_t *value = item_value(run, lo);
        if (state->kind == EMPTY) {
            if (value == NULL) return OK;
            run->delta += 1;
            state->kind = ONE;
            memcpy(state->a, key, KEY);
            memcpy(state->b, value, DIGEST);
            return OK;
        }
        if (memcmp(key, state->a, KEY) == 0) {
            if (value == NULL) {
                run->delta -= 1;
                state->kind = EMPTY;
            } else {
                memcpy(state->b, value, DIGEST);
            }
            return OK;
        }
        if (value == NULL) return OK; /* deleting a key that is not there */
        /* a second key joins the lone leaf: the chunk(s) below are made as below */
    }
    if (depth > MAX_DEPTH) return FALLBACK; /* two distinct keys cannot share 256 bits */
    /* a chunk (2 KiB) per level on the heap, not the stack: 64 levels deep at most */
    Chunk *c = PyMem_Malloc(sizeof *c);
    if (c == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    int rc = update_chunk(run, depth, state, lo, hi, c);
    PyMem_Free(c);
    return rc;
}

/* :c:func:`subtree` where a chunk is (or will be) at ``depth``, in ``c``. */
static int update_chunk(Apply *run, int depth, State *state, Py_ssize_t lo, Py_ssize_t hi,
                        Chunk *c) {
    const uint8_t *first = item_key(run, lo);
    int existed = state->kind == INNER;
    unsigned dirty = 0;
    if (existed) {
        int rc = read_chunk(run, depth, first, state->a, c);
        if (rc != OK) return rc;
    } else {
        memset(c->kind, EMPTY, sizeof c->kind);
        if (state->kind == ONE) { /* the lone leaf, in its slot of a new chunk */
            const uint8_t *lone = state->a;
            int n = depth >> 3;
            if (memcmp(lone, first, (size_t)n) != 0) return FALLBACK;
            if ((depth & 4) && (lone[n] & 0xF0) != (first[n] & 0xF0)) return FALLBACK;
            int home = nibble(lone, depth);
            set_slot(c, home, state);
            dirty |= ancestors(home);
        }
    }
    int moved = 0;
    Py_ssize_t i = lo;
    while (i < hi) {
        int slot = nibble(item_key(run, i), depth);
        Py_ssize_t j = i + 1;
        while (j < hi && nibble(item_key(run, j), depth) == slot) j++;
        State before, after;
        slot_state(c, slot, &before);
        after = before;
        int rc = subtree(run, depth + 4, &after, i, j);
        if (rc != OK) return rc;
        if (!same_state(&before, &after)) {
            set_slot(c, slot, &after);
            dirty |= ancestors(slot);
            moved = 1;
        }
        i = j;
    }
    if (!moved) return OK;
    unsigned children, leaves;
    bitmaps(c, &children, &leaves);
    if (!children && __builtin_popcount(leaves) <= 1) { /* fewer than two keys: collapse */
        if (existed && put_row(run->writes, depth, first, Py_None) != OK) return FAILED;
        if (!leaves) {
            state->kind = EMPTY;
        } else {
            slot_state(c, 15 - (31 - __builtin_clz(leaves)), state);
        }
        return OK;
    }
    state->kind = INNER;
    return put_chunk(run->writes, depth, first, c, dirty, state->a);
}

static int read_state(PyObject *tuple, State *state) {
    /* (kind, a, b) as core.smt_store.SubtreeState */
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 3) return FALLBACK;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(tuple, 0));
    if (kind == -1 && PyErr_Occurred()) return FAILED;
    PyObject *a = PyTuple_GET_ITEM(tuple, 1), *b = PyTuple_GET_ITEM(tuple, 2);
    if (!PyBytes_Check(a) || !PyBytes_Check(b)) return FALLBACK;
    state->kind = (uint8_t)kind;
    if (kind == EMPTY) return OK;
    if (kind == INNER && PyBytes_GET_SIZE(a) == DIGEST) {
        memcpy(state->a, PyBytes_AS_STRING(a), DIGEST);
        return OK;
    }
    if (kind == ONE && PyBytes_GET_SIZE(a) == KEY && PyBytes_GET_SIZE(b) == DIGEST) {
        memcpy(state->a, PyBytes_AS_STRING(a), KEY);
        memcpy(state->b, PyBytes_AS_STRING(b), DIGEST);
        return OK;
    }
    return FALLBACK;
}

static PyObject *state_tuple(const State *state) {
    if (state->kind == EMPTY) return Py_BuildValue("(iy#y#)", EMPTY, "", (Py_ssize_t)0, "", (Py_ssize_t)0);
    if (state->kind == INNER)
        return Py_BuildValue("(iy#y#)", INNER, state->a, (Py_ssize_t)DIGEST, "", (Py_ssize_t)0);
    return Py_BuildValue("(iy#y#)", ONE, state->a, (Py_ssize_t)KEY, state->b, (Py_ssize_t)DIGEST);
}

PyDoc_STRVAR(apply_doc,
"apply(get, items, state, writes) -> (new_state, delta) | None\n\n"
"The bulk update of core.smt_apply.smt_store_apply from the root: ``items`` a list of\n"
"(32-byte key, 32-byte value hash or None) sorted by key and checked, ``state`` the\n"
"root's SubtreeState. The rows to write go into the dict ``writes``. None: something\n"
"is not as the layout allows; run the reference, which says what.");

static PyObject *smt_apply(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyList_Check(args[1]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "apply(get, items: list, state, writes: dict)");
        return NULL;
    }
    Apply run = {args[0], args[1], args[3], 0};
    Py_ssize_t count = PyList_GET_SIZE(run.items);
    for (Py_ssize_t i = 0; i < count; i++) { /* the reference checked them; make sure */
        PyObject *item = PyList_GET_ITEM(run.items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) Py_RETURN_NONE;
        PyObject *key = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) != KEY) Py_RETURN_NONE;
        if (value != Py_None && (!PyBytes_CheckExact(value) || PyBytes_GET_SIZE(value) != DIGEST))
            Py_RETURN_NONE;
        if (i && memcmp(PyBytes_AS_STRING(key), item_key(&run, i - 1), KEY) <= 0) Py_RETURN_NONE;
    }
    State state;
    int rc = read_state(args[2], &state);
    if (rc == OK && count) rc = subtree(&run, 0, &state, 0, count);
    if (rc == FAILED) return NULL;
    if (rc == FALLBACK) {
        PyDict_Clear(run.writes);
        Py_RETURN_NONE;
    }
    PyObject *tuple = state_tuple(&state);
    if (tuple == NULL) return NULL;
    return Py_BuildValue("(NL)", tuple, run.delta);
}

/* -------------------------------------------------------------- SMT: the bulk build */

typedef struct {
    PyObject *keys;   /* list of 32-byte keys, sorted, distinct */
    PyObject *values; /* list of 32-byte value hashes */
    PyObject *writes; /* row key -> bytes */
} Build;

static inline const uint8_t *build_key(const Build *run, Py_ssize_t i) {
    return (const uint8_t *)PyBytes_AS_STRING(PyList_GET_ITEM(run->keys, i));
}

/* Write the chunk at ``depth`` holding keys [lo, hi) (two or more, below one prefix) and
 * every chunk below it; its hash goes to ``out`` (``core.smt_apply._Build.chunk``). */
static int build_in(Build *run, int depth, Py_ssize_t lo, Py_ssize_t hi, uint8_t out[DIGEST],
                    Chunk *c);

static int build_chunk(Build *run, int depth, Py_ssize_t lo, Py_ssize_t hi, uint8_t out[DIGEST]) {
    Chunk *c = PyMem_Malloc(sizeof *c); /* on the heap, as in subtree() */
    if (c == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    int rc = build_in(run, depth, lo, hi, out, c);
    PyMem_Free(c);
    return rc;
}

static int build_in(Build *run, int depth, Py_ssize_t lo, Py_ssize_t hi, uint8_t out[DIGEST],
                    Chunk *c) {
    memset(c->kind, EMPTY, sizeof c->kind);
    Py_ssize_t i = lo;
    while (i < hi) {
        int slot = nibble(build_key(run, i), depth);
        Py_ssize_t j = i + 1;
        while (j < hi && nibble(build_key(run, j), depth) == slot) j++;
        if (j - i == 1) {
            c->kind[16 + slot] = ONE;
            memcpy(c->leaf[slot], build_key(run, i), KEY);
            memcpy(c->leaf[slot] + KEY, PyBytes_AS_STRING(PyList_GET_ITEM(run->values, i)), DIGEST);
        } else {
            if (depth >= MAX_DEPTH) return FALLBACK; /* a key given twice */
            int rc = build_chunk(run, depth + 4, i, j, c->hash[16 + slot]);
            if (rc != OK) return rc;
            c->kind[16 + slot] = INNER;
        }
        i = j;
    }
    return put_chunk(run->writes, depth, build_key(run, lo), c, 0xFFFEu, out); /* all new */
}

PyDoc_STRVAR(build_doc,
"build(keys, values, writes) -> root | None\n\n"
"The chunks of core.smt_apply.smt_store_build for two or more keys: ``keys`` a sorted\n"
"list of distinct 32-byte keys, ``values`` their 32-byte value hashes. Every chunk row\n"
"goes into the dict ``writes``; returns the root chunk's hash. None: the input is not\n"
"as described (run the reference).");

static PyObject *smt_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "build(keys: list, values: list, writes: dict)");
        return NULL;
    }
    Build run = {args[0], args[1], args[2]};
    Py_ssize_t count = PyList_GET_SIZE(run.keys);
    if (count < 2 || PyList_GET_SIZE(run.values) != count) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = PyList_GET_ITEM(run.keys, i), *value = PyList_GET_ITEM(run.values, i);
        if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) != KEY) Py_RETURN_NONE;
        if (!PyBytes_CheckExact(value) || PyBytes_GET_SIZE(value) != DIGEST) Py_RETURN_NONE;
        if (i && memcmp(PyBytes_AS_STRING(key), build_key(&run, i - 1), KEY) <= 0) Py_RETURN_NONE;
    }
    uint8_t root[DIGEST];
    int rc = build_chunk(&run, 0, 0, count, root);
    if (rc == FAILED) return NULL;
    if (rc == FALLBACK) {
        PyDict_Clear(run.writes);
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)root, DIGEST);
}

PyDoc_STRVAR(blake3_doc,
"blake3(data) -> bytes\n\n"
"BLAKE3-256 of ``data`` (at most 1,024 bytes), as this module hashes nodes and leaves.");

static PyObject *smt_blake3(PyObject *module, PyObject *data) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len > CHUNK) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "at most 1,024 bytes");
        return NULL;
    }
    uint8_t out[DIGEST];
    blake3_small((const uint8_t *)view.buf, (size_t)view.len, out);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, DIGEST);
}

/* ----------------------------------------------------------- keyword postings columns */

PyDoc_STRVAR(columns_doc,
"columns(values, rank) -> (terms, tf) | None\n\n"
"The term and frequency columns of ``core.segments.Postings.from_docs``: for each dict of\n"
"``values`` in turn, each of its terms in the dict's order, the term's number in ``rank``\n"
"(a term not there yet is given the next number) as a native uint32, and its frequency\n"
"as a native int64. ``None`` if a value is not a dict of str to int that fits 64 bits\n"
"(the caller then runs its Python form, which decides).");

static PyObject *postings_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyList_Check(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "columns(values: list, rank: dict)");
        return NULL;
    }
    PyObject *values = args[0], *rank = args[1];
    Py_ssize_t docs = PyList_GET_SIZE(values), total = 0;
    for (Py_ssize_t i = 0; i < docs; i++) {
        PyObject *doc = PyList_GET_ITEM(values, i);
        if (!PyDict_CheckExact(doc)) Py_RETURN_NONE;
        total += PyDict_GET_SIZE(doc);
    }
    if (total > (Py_ssize_t)UINT32_MAX) Py_RETURN_NONE;
    PyObject *terms = PyBytes_FromStringAndSize(NULL, total * (Py_ssize_t)sizeof(uint32_t));
    PyObject *freqs = PyBytes_FromStringAndSize(NULL, total * (Py_ssize_t)sizeof(int64_t));
    if (terms == NULL || freqs == NULL) goto failed;
    uint32_t *term_at = (uint32_t *)PyBytes_AS_STRING(terms);
    int64_t *freq_at = (int64_t *)PyBytes_AS_STRING(freqs);
    Py_ssize_t at = 0;
    /* The docs' keys are exact str, so no hash or comparison runs Python code: nothing
     * can change ``values`` or a doc while they are walked. */
    for (Py_ssize_t i = 0; i < docs; i++) {
        PyObject *doc = PyList_GET_ITEM(values, i), *term, *freq;
        Py_ssize_t pos = 0;
        while (PyDict_Next(doc, &pos, &term, &freq)) {
            if (at == total || !PyUnicode_CheckExact(term) || !PyLong_CheckExact(freq)) {
                goto fallback;
            }
            long long value = PyLong_AsLongLong(freq);
            if (value == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto fallback;
            }
            Py_ssize_t number;
            PyObject *known = PyDict_GetItemWithError(rank, term);
            if (known != NULL) {
                number = PyLong_AsSsize_t(known);
                if (number == -1 && PyErr_Occurred()) goto failed;
            } else {
                if (PyErr_Occurred()) goto failed;
                number = PyDict_GET_SIZE(rank);
                PyObject *fresh = PyLong_FromSsize_t(number);
                if (fresh == NULL) goto failed;
                int rc = PyDict_SetItem(rank, term, fresh);
                Py_DECREF(fresh);
                if (rc < 0) goto failed;
            }
            term_at[at] = (uint32_t)number;
            freq_at[at] = (int64_t)value;
            at++;
        }
    }
    if (at != total) goto fallback;
    return Py_BuildValue("(NN)", terms, freqs);
fallback:
    Py_XDECREF(terms);
    Py_XDECREF(freqs);
    Py_RETURN_NONE;
failed:
    Py_XDECREF(terms);
    Py_XDECREF(freqs);
    return NULL;
}

static PyMethodDef methods[] = {
    {"apply", (PyCFunction)(void (*)(void))smt_apply, METH_FASTCALL, apply_doc},
    {"build", (PyCFunction)(void (*)(void))smt_build, METH_FASTCALL, build_doc},
    {"blake3", smt_blake3, METH_O, blake3_doc},
    {"columns", (PyCFunction)(void (*)(void))postings_columns, METH_FASTCALL, columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "cortexgraph.core.smt_native",
    .m_doc = "The chunked SMT's bulk update and build in C (BLAKE3 stores; see core.smt_apply),"
             " BLAKE3 of one chunk and keyword postings columns.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit_smt_native(void) { return PyModule_Create(&module_def); }
