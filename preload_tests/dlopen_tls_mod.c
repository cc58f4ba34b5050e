/* dlopen_tls_mod — the shared module dlopen_tls loads at run time: initial-exec
 * TLS in a dlopen'd object, which glibc places in the static TLS surplus of every
 * thread, those that exist at the dlopen included (it copies the module's TLS
 * image into each of them then). Built as libbobbin_tls_mod.so beside the test.
 */
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
