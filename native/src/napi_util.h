/* Node-API helpers shared by the addon's files, and what the module's init
 * (nfq.c) registers besides NFQUEUE. */
#ifndef SLUICE_NAPI_UTIL_H
#define SLUICE_NAPI_UTIL_H
#include <stdint.h>
#include <stddef.h>
#include <node_api.h>

/* An Error with a stable .code and message text, .errno if err != 0, .syscall if not NULL. */
napi_value coded_error(napi_env env, const char *code, const char *text, int err, const char *syscall);
/* The Error throw_coded throws: msg, and when err != 0 its text and syscall appended, .errno and .syscall set. */
napi_value coded_error_errno(napi_env env, const char *code, const char *msg, int err, const char *syscall);
/* Throws an Error with a stable .code, and .errno/.syscall when err != 0. */
void throw_coded(napi_env env, const char *code, const char *msg, int err, const char *syscall);
/* 1 if v is a number that fits a uint32. */
int get_u32(napi_env env, napi_value v, uint32_t *out);
/* 1 if v is a typed array of type `want`; its data and element count. */
int get_typed(napi_env env, napi_value v, napi_typedarray_type want, void **data, size_t *len);
/* Rethrows a pending exception as uncaught (a JS callback called from libuv has no JS caller). */
void raise_pending(napi_env env);
/* The pointer behind an external value (a binding's handle), or NULL if v is not one. */
void *get_external(napi_env env, napi_value v);
/* Threadpool work that settles a promise: creates the promise (*deferred)
 * and the work (*work: execute off the loop, complete on it, which must
 * settle *deferred and delete *work) and queues it. Returns the promise with
 * *started = 1. Otherwise *started = 0, complete will never run and the
 * caller frees `data`: nothing could be made (an Error with `code`, "cannot
 * start <what>", is thrown and NULL returned), or the work was made but not
 * queued (deleted; the promise is returned rejected, "cannot queue <what>"). */
napi_value queue_promise_work(napi_env env, const char *name, napi_async_execute_callback execute, napi_async_complete_callback complete,
                              void *data, napi_deferred *deferred, napi_async_work *work, const char *code, const char *what, int *started);
int is_function(napi_env env, napi_value v);                               /* 1 if v is a function */
void set_number(napi_env env, napi_value obj, const char *name, double v); /* obj[name] = v */
void nflog_register(napi_env env, napi_value exports);          /* nflog.c */
void ctevents_register(napi_env env, napi_value exports);       /* ctevents.c */
napi_value sq_sd_notify(napi_env env, napi_callback_info info); /* sd_notify.c */
void reuseport_register(napi_env env, napi_value exports);      /* reuseport.c */
void udp_batch_register(napi_env env, napi_value exports);      /* udp_batch.c */
void loop_turns_register(napi_env env, napi_value exports);     /* loop_turns.c */
void nft_netlink_register(napi_env env, napi_value exports);   /* nft_netlink.c */
void run_command_register(napi_env env, napi_value exports);   /* run_command.c */
void read_full_register(napi_env env, napi_value exports);     /* read_full.c */
void ct_dump_register(napi_env env, napi_value exports);       /* ct_dump.c */
void ct_msg_register(napi_env env, napi_value exports);        /* ct_msg.c */
void ct_expire_register(napi_env env, napi_value exports);     /* ct_expire.c */
#endif
