/* Small Node-API helpers shared by the addon's bindings (see napi_util.h). */
#include <stdio.h>
#include <string.h>
#include "napi_util.h"

napi_value coded_error(napi_env env, const char *code, const char *text, int err, const char *syscall) {
  napi_value jcode, jmsg, error, v;
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &jcode);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &jmsg);
  napi_create_error(env, jcode, jmsg, &error);
  if (err) set_number(env, error, "errno", err);
  if (syscall) {
    napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, error, "syscall", v);
  }
  return error;
}

napi_value coded_error_errno(napi_env env, const char *code, const char *msg, int err, const char *syscall) {
  char text[384];
  if (err) snprintf(text, sizeof text, "%s: %s (%s)", msg, strerror(err), syscall ? syscall : "?");
  else snprintf(text, sizeof text, "%s", msg);
  return coded_error(env, code, text, err, err ? (syscall ? syscall : "") : NULL);
}

void throw_coded(napi_env env, const char *code, const char *msg, int err, const char *syscall) {
  napi_throw(env, coded_error_errno(env, code, msg, err, syscall));
}

int get_u32(napi_env env, napi_value v, uint32_t *out) {
  return napi_get_value_uint32(env, v, out) == napi_ok;
}

int get_typed(napi_env env, napi_value v, napi_typedarray_type want, void **data, size_t *len) {
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  bool is;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  if (napi_get_typedarray_info(env, v, &type, len, data, &ab, &off) != napi_ok) return 0;
  return type == want;
}

void raise_pending(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc); /* same as an uncaught throw in JS */
  }
}

void *get_external(napi_env env, napi_value v) {
  void *p = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external) return NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok) return NULL;
  return p;
}

int is_function(napi_env env, napi_value v) {
  napi_valuetype t;
  return napi_typeof(env, v, &t) == napi_ok && t == napi_function;
}

void set_number(napi_env env, napi_value obj, const char *name, double v) {
  napi_value jv;
  napi_create_double(env, v, &jv);
  napi_set_named_property(env, obj, name, jv);
}

napi_value queue_promise_work(napi_env env, const char *name, napi_async_execute_callback execute, napi_async_complete_callback complete,
                              void *data, napi_deferred *deferred, napi_async_work *work, const char *code, const char *what, int *started) {
  char msg[128];
  napi_value promise, resource;
  *started = 0;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource);
  if (napi_create_promise(env, deferred, &promise) != napi_ok) {
    snprintf(msg, sizeof msg, "cannot start %s", what);
    throw_coded(env, code, msg, 0, NULL);
    return NULL;
  }
  if (napi_create_async_work(env, NULL, resource, execute, complete, data, work) != napi_ok) {
    snprintf(msg, sizeof msg, "cannot start %s", what);
    napi_reject_deferred(env, *deferred, coded_error(env, code, msg, 0, NULL));
    return promise;
  }
  if (napi_queue_async_work(env, *work) != napi_ok) {
    napi_delete_async_work(env, *work);
    snprintf(msg, sizeof msg, "cannot queue %s", what);
    napi_reject_deferred(env, *deferred, coded_error(env, code, msg, 0, NULL));
    return promise;
  }
  *started = 1;
  return promise;
}
