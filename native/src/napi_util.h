/* Small Node-API helpers shared by the addon's bindings (nfq.c, nflog.c, sd_notify.c). */
#ifndef SLUICE_NAPI_UTIL_H
#define SLUICE_NAPI_UTIL_H
#include <stdint.h>
#include <stddef.h>
#include <node_api.h>

/* An Error with a stable .code and message text, .errno if err != 0 and
 * .syscall if syscall != NULL. */
napi_value coded_error(napi_env env, const char *code, const char *text, int err, const char *syscall);
/* Throws an Error with a stable .code, and .errno/.syscall when err != 0. */
void throw_coded(napi_env env, const char *code, const char *msg, int err, const char *syscall);
/* 1 if v is a number that fits a uint32. */
int get_u32(napi_env env, napi_value v, uint32_t *out);
/* 1 if v is a typed array of type `want`; its data and element count. */
int get_typed(napi_env env, napi_value v, napi_typedarray_type want, void **data, size_t *len);
/* Rethrows a pending exception as an uncaught one (a throwing JS callback
 * called from a libuv callback has no JS caller to catch it). */
void raise_pending(napi_env env);
/* The pointer behind an external value (a binding's handle), or NULL if v
 * is not an external. */
void *get_external(napi_env env, napi_value v);
/* 1 if v is a function. */
int is_function(napi_env env, napi_value v);
/* obj[name] = v */
void set_number(napi_env env, napi_value obj, const char *name, double v);
#endif
