/**
 * sluice_control_*: the control plane of any daemon (ControlNode counters),
 * the same names in front, dns and agent so one dashboard fits all.
 * Labels: message type (MESSAGE_TYPES), reject reason (REJECT_REASONS), ZAP
 * domain (the daemon's few bound sockets): all bounded sets.
 */
import type { Registry } from 'prom-client';
import type { ControlNode } from '../control/node.ts';
import { byKey, counterFrom, counterOf, gaugeOf, type Sample } from './collect.ts';

/** `node()` is read at each scrape: undefined while the daemon runs without a control plane (no series then). */
export function registerControlMetrics(registry: Registry, node: () => ControlNode | undefined): void {
  const counters = (): ControlNode['counters'] | undefined => node()?.counters;
  counterFrom(registry, 'sluice_control_messages_received_total', 'Control messages received and accepted, by type.', ['type'], () => {
    const c = counters();
    return c ? byKey('type', c.received, (k) => k) : [];
  });
  counterFrom(registry, 'sluice_control_messages_sent_total', 'Control messages sent, by type.', ['type'], () => {
    const c = counters();
    return c ? byKey('type', c.sent, (k) => k) : [];
  });
  counterFrom(registry, 'sluice_control_messages_rejected_total', 'Control messages dropped by the receive checks, by reason.', ['reason'], () => {
    const c = counters();
    return c ? byKey('reason', c.rejected, (k) => k) : [];
  });
  counterOf(registry, 'sluice_control_send_dropped_total', 'Control messages not sent: no connected peer or the send queue full.', () => counters()?.sendDropped ?? 0);
  counterOf(registry, 'sluice_control_handler_errors_total', 'Accepted control messages whose handler failed.', () => counters()?.handlerErrors ?? 0);
  counterOf(registry, 'sluice_control_receive_errors_total', 'Socket receives that failed and were retried (EAGAIN from zeromq.js, or worse: logged).', () => counters()?.receiveErrors ?? 0);
  counterFrom(registry, 'sluice_control_handshake_failures_total', 'Control connection handshakes that failed: auth = key not allowed, protocol = not ZMTP/CURVE.', ['kind'], () => {
    const h = node()?.curve.handshakes;
    return h
      ? [
          [{ kind: 'auth' }, h.authFailures],
          [{ kind: 'protocol' }, h.protocolFailures],
        ]
      : [];
  });
  counterFrom(registry, 'sluice_control_zap_handshakes_total', 'CURVE handshakes checked against our allowlists, by domain and result.', ['domain', 'result'], () => {
    const n = node();
    if (!n) return [];
    const out: Sample<'domain' | 'result'>[] = [];
    const own = `${n.name}/`;
    for (const [domain, c] of n.zap.counters) {
      // The ZAP handler is per process; report our own domains only.
      if (!domain.startsWith(own)) continue;
      const d = domain.slice(own.length);
      out.push([{ domain: d, result: 'accepted' }, c.accepted], [{ domain: d, result: 'refused' }, c.refused]);
    }
    return out;
  });
  gaugeOf(registry, 'sluice_control_peers', 'Distinct control-plane senders seen since start (bounded at 4096).', () => node()?.peers.size ?? 0);
}
