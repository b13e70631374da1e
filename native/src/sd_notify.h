/* sd_notify for Node (sd_notify.c); registered by the module's init in nfq.c. */
#ifndef SLUICE_SD_NOTIFY_H
#define SLUICE_SD_NOTIFY_H
#include <node_api.h>
napi_value sq_sd_notify(napi_env env, napi_callback_info info);
#endif
