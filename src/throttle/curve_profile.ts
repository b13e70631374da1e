/**
 * The throttling sockets' CURVE profile (src/control/curve.ts): quicker
 * heartbeats and reconnects than the control plane's, because a gatekeeper
 * that misses DELAY_UNTIL messages lets clients through.
 */
import type { ControlBase } from '../control/config.ts';
import type { CurveProfile } from '../control/curve.ts';

export function throttleProfile(base: ControlBase): CurveProfile {
  return {
    label: 'throttling',
    plaintextWarning: 'throttling sockets in PLAINTEXT mode: no encryption and no authentication; set control.plaintext: false and configure keys',
    maxMessageSize: base.maxMessageBytes,
    heartbeatInterval: 1000,
    heartbeatTimeout: 3000,
    reconnectInterval: 100,
    reconnectMaxInterval: 2000,
    // As the control plane's (src/control/node.ts): a master back after a
    // silent outage is heard within ~4 s, not at the next SYN retransmission.
    connectTimeout: 2000,
  };
}
