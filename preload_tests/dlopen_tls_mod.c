/* dlopen_tls_mod — the shared module dlopen_tls loads at run time: initial-exec
 * TLS in a dlopen'd object, which glibc places in the static TLS surplus of every
 * thread, those that exist at the dlopen included (it copies the module's TLS
 * image into each of them then). Built as libbobbin_tls_mod.so beside the test.
 * It also calls libc, so that loaded into a new namespace (dlmopen) it brings a
 * libc.so of its own, whose errno and locale are static TLS too.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

__attribute__((visibility("default"))) __thread int tls_val
    __attribute__((tls_model("initial-exec"))) = 42;
__attribute__((visibility("default"))) __thread char tls_buf[64]
    __attribute__((tls_model("initial-exec"))) = "image";

/* the calling thread's copies */
__attribute__((visibility("default"))) int *mod_val(void)
{
    return &tls_val;
}

__attribute__((visibility("default"))) const char *mod_buf(void)
{
    return tls_buf;
}

/* errno as the module's libc sets it for a file that does not exist */
__attribute__((visibility("default"))) int mod_errno(void)
{
    errno = 0;
    int fd = open("/nonexistent-bobbin-dir/x", O_RDONLY);
    if (fd >= 0) {
        close(fd);
        return -1;
    }
    return errno;
}

/* the module's libc's message (its locale data, through its TLS) */
__attribute__((visibility("default"))) const char *mod_strerror(int e)
{
    return strerror(e);
}
