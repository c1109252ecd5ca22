/*
 * Triton's response callbacks for the in-process client (inprocess_client.py), in C.
 *
 * Why C: Triton calls these on its own threads, for every response and for every output
 * buffer.  Written in Python (ctypes), each call has to take the interpreter's lock from
 * the event loop that holds it; measured, that cost as much CPU per token as the
 * tritonserver process it replaces, and delayed the first tokens.  Here a response's
 * outputs are copied into one record, the response is freed, and the record is queued;
 * the loop is woken through an eventfd only when the queue was empty, and takes every
 * queued record in one call (shim_take).  No Python runs on Triton's threads.
 *
 * Loaded with ctypes; the module init only makes it importable (so that its path is
 * found like any module's).  Triton's functions come from shim_init, as pointers, so
 * that nothing here links against a particular libtritonserver.
 *
 * Nothing fails silently: a response whose outputs cannot be read becomes an error
 * record (the client raises it), and an output buffer that cannot be allocated is an
 * error returned to Triton, which fails the response with it.
 *
 * A record (native byte order):
 *   u64 key, u32 kind (0 response, 1 request released), u32 flags,
 *   i32 error code (-1: none), u32 error length, error bytes,
 *   u32 output count, per output: u32 name length, name, i32 datatype, u32 dims,
 *   i64 dim * dims, u64 byte size, bytes.
 * shim_take returns the queued records, each preceded by its u64 length.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef void *(*response_error_fn)(void *response);
typedef void *(*output_count_fn)(void *response, uint32_t *count);
typedef void *(*output_fn)(void *response, uint32_t index, const char **name,
                           int *datatype, const int64_t **shape, uint64_t *dims,
                           const void **base, size_t *byte_size, int *memory_type,
                           int64_t *memory_type_id, void **userp);
typedef void *(*response_delete_fn)(void *response);
typedef const char *(*error_message_fn)(void *error);
typedef int (*error_code_fn)(void *error);
typedef void (*error_delete_fn)(void *error);
typedef void *(*error_new_fn)(int code, const char *message);

static response_error_fn response_error;
static output_count_fn output_count;
static output_fn output;
static response_delete_fn response_delete;
static error_message_fn error_message;
static error_code_fn error_code;
static error_delete_fn error_delete;
static error_new_fn error_new;

#define TRITONSERVER_ERROR_INTERNAL 1

struct node {
    struct node *next;
    uint64_t size;
    unsigned char data[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *head, *tail;
static uint64_t queued_bytes;
static int wake_fd = -1;

int shim_init(void *re, void *oc, void *o, void *rd, void *em, void *ec, void *ed,
              void *en) {
    response_error = (response_error_fn)re;
    output_count = (output_count_fn)oc;
    output = (output_fn)o;
    response_delete = (response_delete_fn)rd;
    error_message = (error_message_fn)em;
    error_code = (error_code_fn)ec;
    error_delete = (error_delete_fn)ed;
    error_new = (error_new_fn)en;
    if (wake_fd < 0)
        wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return wake_fd;
}

static void enqueue(struct node *n) {
    int was_empty;
    n->next = NULL;
    pthread_mutex_lock(&lock);
    was_empty = head == NULL;
    if (tail)
        tail->next = n;
    else
        head = n;
    tail = n;
    queued_bytes += n->size + sizeof(uint64_t);
    pthread_mutex_unlock(&lock);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t written = write(wake_fd, &one, sizeof one);
        (void)written; /* a full counter still wakes the reader */
    }
}

/* Appends `size` bytes of `src` at *at. */
static unsigned char *put(unsigned char *at, const void *src, size_t size) {
    if (size)
        memcpy(at, src, size);
    return at + size;
}

#define MAX_OUTPUTS 64

void *shim_alloc(void *allocator, const char *name, size_t byte_size, int memory_type,
                 int64_t memory_type_id, void *userp, void **buffer, void **buffer_userp,
                 int *actual_memory_type, int64_t *actual_memory_type_id) {
    (void)allocator; (void)memory_type; (void)memory_type_id; (void)userp;
    *buffer = byte_size ? malloc(byte_size) : NULL;
    *buffer_userp = NULL;
    *actual_memory_type = 0; /* TRITONSERVER_MEMORY_CPU */
    *actual_memory_type_id = 0;
    if (byte_size && !*buffer) {
        char text[256];
        snprintf(text, sizeof text, "could not allocate %zu bytes for output %s", byte_size,
                 name ? name : "");
        return error_new(TRITONSERVER_ERROR_INTERNAL, text);
    }
    return NULL;
}

void *shim_release(void *allocator, void *buffer, void *buffer_userp, size_t byte_size,
                   int memory_type, int64_t memory_type_id) {
    (void)allocator; (void)buffer_userp; (void)byte_size; (void)memory_type;
    (void)memory_type_id;
    free(buffer);
    return NULL;
}

/* Writes "what: Triton's message" into text, frees the error, and returns its code. */
static int32_t take_error(void *e, const char *what, char *text, size_t size) {
    int32_t code = error_code(e);
    const char *message = error_message(e);
    snprintf(text, size, "%s: %s", what, message ? message : "");
    error_delete(e);
    return code;
}

void shim_response(void *response, uint32_t flags, void *userp) {
    char text[512];
    const char *names[MAX_OUTPUTS];
    int datatypes[MAX_OUTPUTS];
    const int64_t *shapes[MAX_OUTPUTS];
    uint64_t dims[MAX_OUTPUTS];
    const void *bases[MAX_OUTPUTS];
    size_t sizes[MAX_OUTPUTS];
    uint32_t count = 0, i;
    int32_t code = -1;
    const char *message = "";
    uint32_t message_len = 0;
    size_t size = 8 + 4 + 4 + 4 + 4 + 4;
    void *error = NULL;

    if (response) {
        error = response_error(response); /* owned by the response */
        if (error) {
            code = error_code(error);
            message = error_message(error);
            message_len = (uint32_t)strlen(message);
        } else {
            void *e = output_count(response, &count);
            if (e) {
                code = take_error(e, "Triton could not read the response's outputs", text,
                                  sizeof text);
                count = 0;
            }
            if (count > MAX_OUTPUTS)
                count = MAX_OUTPUTS;
        }
    }
    for (i = 0; i < count; i++) {
        int memory_type;
        int64_t memory_type_id;
        void *out_userp;
        void *e = output(response, i, &names[i], &datatypes[i], &shapes[i], &dims[i],
                         &bases[i], &sizes[i], &memory_type, &memory_type_id, &out_userp);
        if (e) {
            /* A response missing an output is not the answer: the whole of it is an error. */
            char what[64];
            snprintf(what, sizeof what, "Triton could not read output %u of the response", i);
            code = take_error(e, what, text, sizeof text);
            count = 0;
            break;
        }
    }
    if (code >= 0 && !error) { /* not the response's own error: one read above */
        message = text;
        message_len = (uint32_t)strlen(text);
    }
    size += message_len;
    for (i = 0; i < count; i++)
        size += 4 + strlen(names[i]) + 4 + 4 + 8 * dims[i] + 8 + sizes[i];

    struct node *n = malloc(sizeof(struct node) + size);
    if (!n)
        abort(); /* as Triton does when it cannot allocate */
    n->size = size;
    unsigned char *at = n->data;
    uint64_t key = (uint64_t)(uintptr_t)userp;
    uint32_t kind = 0;
    at = put(at, &key, 8);
    at = put(at, &kind, 4);
    at = put(at, &flags, 4);
    at = put(at, &code, 4);
    at = put(at, &message_len, 4);
    at = put(at, message, message_len);
    at = put(at, &count, 4);
    for (i = 0; i < count; i++) {
        uint32_t name_len = (uint32_t)strlen(names[i]);
        uint32_t d = (uint32_t)dims[i];
        uint64_t byte_size = sizes[i];
        at = put(at, &name_len, 4);
        at = put(at, names[i], name_len);
        at = put(at, &datatypes[i], 4);
        at = put(at, &d, 4);
        at = put(at, shapes[i], 8 * (size_t)d);
        at = put(at, &byte_size, 8);
        at = put(at, bases[i], byte_size);
    }
    if (response)
        response_delete(response);
    enqueue(n);
}

void shim_request_released(void *request, uint32_t flags, void *userp) {
    /* The request is deleted by the loop, which is also the only caller of
       TRITONSERVER_InferenceRequestCancel: a cancel never meets a deleted request. */
    (void)request;
    size_t size = 8 + 4 + 4 + 4 + 4 + 4;
    struct node *n = malloc(sizeof(struct node) + size);
    if (!n)
        abort();
    n->size = size;
    uint64_t key = (uint64_t)(uintptr_t)userp;
    uint32_t kind = 1, zero = 0;
    int32_t none = -1;
    unsigned char *at = n->data;
    at = put(at, &key, 8);
    at = put(at, &kind, 4);
    at = put(at, &flags, 4);
    at = put(at, &none, 4);
    at = put(at, &zero, 4);
    put(at, &zero, 4);
    enqueue(n);
}

/* Every queued record, each preceded by its u64 length, in one buffer that the caller
   frees with shim_free; *size is its length (0 and NULL when nothing is queued). */
void *shim_take(uint64_t *size) {
    struct node *n;
    uint64_t total;
    uint64_t counter;
    ssize_t got = read(wake_fd, &counter, sizeof counter); /* re-arm the eventfd */
    (void)got;
    pthread_mutex_lock(&lock);
    n = head;
    total = queued_bytes;
    head = tail = NULL;
    queued_bytes = 0;
    pthread_mutex_unlock(&lock);
    *size = total;
    if (!n)
        return NULL;
    unsigned char *out = malloc(total), *at = out;
    if (!out)
        abort();
    while (n) {
        struct node *next = n->next;
        at = put(at, &n->size, 8);
        at = put(at, n->data, n->size);
        free(n);
        n = next;
    }
    return out;
}

void shim_free(void *buffer) { free(buffer); }

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_capi_shim", .m_size = -1};

PyMODINIT_FUNC PyInit__capi_shim(void) { return PyModule_Create(&module); }
