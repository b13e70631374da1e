/* The addon's parts the module's init (nfq.c) registers besides NFQUEUE. */
#ifndef SLUICE_ADDON_H
#define SLUICE_ADDON_H
#include <node_api.h>
void nflog_register(napi_env env, napi_value exports);          /* nflog.c */
napi_value sq_sd_notify(napi_env env, napi_callback_info info); /* sd_notify.c */
#endif
