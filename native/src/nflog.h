/* NFLOG reader (nflog.c); registered by the module's init in nfq.c. */
#ifndef SLUICE_NFLOG_H
#define SLUICE_NFLOG_H
#include <node_api.h>
void nflog_register(napi_env env, napi_value exports);
#endif
