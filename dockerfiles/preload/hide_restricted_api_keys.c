/*
 * hide_restricted_api_keys.so: keeps the keys of tritonserver's restricted APIs off its
 * command line as other processes see it.
 *
 * tritonserver takes those keys only as flags (--http-restricted-api=APIS:HEADER=KEY,
 * --grpc-restricted-protocol=...), and a process's arguments are public on the node:
 * /proc/PID/cmdline, ps, `docker top` and monitoring agents all read them.  Loaded with
 * LD_PRELOAD, this library runs before tritonserver's main():
 *
 *   - each such argument is copied to the heap and its argv slot points to the copy, so
 *     tritonserver parses the real key; the original string, the memory that
 *     /proc/PID/cmdline reads, has the key overwritten with '*' of the same length;
 *   - only those slots change: the pointer array stays where the kernel put it, followed
 *     by the environment and the auxiliary vector, so glibc versions that find `environ`
 *     at &argv[argc + 1] (and anything walking on to auxv) see what they always did;
 *   - before main() it takes itself out of LD_PRELOAD (keeping any other library named
 *     there), so that tritonserver's children (Python backend stubs, vLLM's engine
 *     processes) start without it.
 *
 * What it cannot do: from execve until this code runs (the dynamic loader's few
 * milliseconds) the kernel shows the arguments as given; and /proc/PID/environ keeps
 * showing LD_PRELOAD, as it shows the strings the process started with, not `environ`.
 *
 * Build (tritonbuild/pipeline/components/hide_keys.py has the command):
 *   gcc -O2 -Wall -Wextra -shared -fPIC -o hide_restricted_api_keys.so \
 *       hide_restricted_api_keys.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_main_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
                             void (*)(void), void *);

static main_fn real_main;   /* the program's main(), which main_without_this_library calls */

/* getopt_long takes any unambiguous prefix of a long option.  Among tritonserver's
 * options no prefix shorter than "--http-r" / "--grpc-r" can name these two, so
 * anything from that length up that the full name starts with is one of them (or
 * ambiguous, which tritonserver rejects: hiding it then costs nothing). */
static int is_restricted_api_option(const char *name, size_t len)
{
    static const char *const options[] = {"--http-restricted-api", "--grpc-restricted-protocol"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (len >= 8 && len <= strlen(options[i]) && strncmp(name, options[i], len) == 0)
            return 1;
    return 0;
}

/* Overwrites the key in VALUE ("APIS:HEADER=KEY") with '*'.  Triton reads the key as
 * everything after the first '=' that follows the first ':' (so a key may hold '='); a
 * value not of that shape is hidden whole. */
static void hide_key(char *value)
{
    char *colon = strchr(value, ':');
    char *equals = colon ? strchr(colon + 1, '=') : NULL;
    char *key = equals ? equals + 1 : value;
    memset(key, '*', strlen(key));
}

/* Points argv[i] at a heap copy, so that the original may be overwritten; a failed copy
 * ends the process rather than start tritonserver with a key it cannot keep hidden. */
static void keep_a_private_copy(char **argv, int i)
{
    char *copy = strdup(argv[i]);
    if (copy == NULL) {
        fputs("hide_restricted_api_keys: out of memory copying an argument\n", stderr);
        _exit(127);
    }
    argv[i] = copy;
}

static void hide_restricted_api_keys(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *equals = strchr(argv[i], '=');
        size_t name_len = equals ? (size_t)(equals - argv[i]) : strlen(argv[i]);
        if (!is_restricted_api_option(argv[i], name_len))
            continue;
        if (equals == NULL)   /* "--http-restricted-api VALUE": the value is the next one */
            i++;
        if (i >= argc)
            break;
        char *original = argv[i];
        keep_a_private_copy(argv, i);
        hide_key(equals ? original + name_len + 1 : original);
    }
}

/* Writes to OUT the entries of LIST (separated by spaces or colons, as ld.so reads them)
 * other than this library, which is known by its file name; returns their length.  OUT
 * needs no more room than LIST: each entry kept takes one separator at most. */
static size_t without_this_library(char *out, const char *list)
{
    Dl_info self;
    const char *self_name = "";
    if (dladdr((void *)without_this_library, &self) && self.dli_fname != NULL) {
        const char *slash = strrchr(self.dli_fname, '/');
        self_name = slash ? slash + 1 : self.dli_fname;
    }
    size_t self_len = strlen(self_name), used = 0;
    for (const char *entry = list; *entry != '\0';) {
        size_t len = strcspn(entry, " :");
        const char *base = entry;
        for (const char *p = entry; p < entry + len; p++)
            if (*p == '/')
                base = p + 1;
        int is_self = (size_t)(entry + len - base) == self_len
                      && strncmp(base, self_name, self_len) == 0;
        if (len > 0 && !is_self) {
            if (used > 0)
                out[used++] = ' ';
            memcpy(out + used, entry, len);
            used += len;
        }
        entry += len + (entry[len] != '\0');
    }
    out[used] = '\0';
    return used;
}

/* Takes this library out of LD_PRELOAD, and LD_PRELOAD out of the environment when
 * nothing else is left in it.  `environ` is edited directly, not through setenv() and
 * unsetenv(): a program may define its own (bash does, over its shell variables, which
 * are not there yet before main()). */
static void leave_ld_preload(void)
{
    static const char name[] = "LD_PRELOAD=";
    const size_t name_len = sizeof name - 1;
    for (char **entry = environ; entry != NULL && *entry != NULL;) {
        if (strncmp(*entry, name, name_len) != 0) {
            entry++;
            continue;
        }
        char *kept = malloc(strlen(*entry) + 1);
        if (kept == NULL) {   /* left as it is: the children load this library too, harmlessly */
            entry++;
            continue;
        }
        if (without_this_library(kept + name_len, *entry + name_len) > 0) {
            memcpy(kept, name, name_len);
            *entry++ = kept;
            continue;
        }
        free(kept);           /* nothing else was preloaded: the entry goes */
        for (char **p = entry; (p[0] = p[1]) != NULL; p++)
            ;
    }
}

static int main_without_this_library(int argc, char **argv, char **envp)
{
    (void)envp;
    leave_ld_preload();   /* after libc's start-up, so `environ` is final */
    return real_main(argc, argv, environ);
}

/* The program's _start calls this with its main() and the kernel's argv.  The keys are
 * hidden before any of the program's code runs (its constructors included); then glibc's
 * own start-up goes on, with main_without_this_library in place of main(). */
int __libc_start_main(main_fn program_main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    start_main_fn next = (start_main_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    if (next == NULL) {
        fputs("hide_restricted_api_keys: no __libc_start_main to call\n", stderr);
        _exit(127);
    }
    hide_restricted_api_keys(argc, argv);
    real_main = program_main;
    return next(main_without_this_library, argc, argv, init, fini, rtld_fini, stack_end);
}
