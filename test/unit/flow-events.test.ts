/**
 * The conntrack event replay that the netns concurrency tests judge by
 * (test/helpers/flow-events.ts): lines as `conntrack -E` (1.4.7) prints
 * them, and the replay's count of flows open at once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFlowEvent, replayFlows, type FlowEvent } from '../helpers/flow-events.ts';

const T = 'src=198.18.1.10 dst=198.19.1.1 sport=40001 dport=80';
const R = 'src=198.18.201.11 dst=198.18.1.10 sport=80 dport=40001';

describe('conntrack event lines', () => {
  const cases: [string, string, FlowEvent['kind'] | undefined][] = [
    ['new', `    [NEW] tcp      6 120 SYN_SENT ${T} [UNREPLIED] ${R}`, 'open'],
    ['syn-ack seen', ` [UPDATE] tcp      6 60 SYN_RECV ${T} ${R}`, undefined],
    ['established', ` [UPDATE] tcp      6 432000 ESTABLISHED ${T} ${R} [ASSURED]`, undefined],
    ['client FIN', ` [UPDATE] tcp      6 120 FIN_WAIT ${T} ${R} [ASSURED]`, 'close'],
    ['server FIN', ` [UPDATE] tcp      6 60 CLOSE_WAIT ${T} ${R} [ASSURED]`, 'close'],
    ['RST', ` [UPDATE] tcp      6 10 CLOSE ${T} ${R} [ASSURED]`, 'close'],
    ['destroyed', `[DESTROY] tcp      6 ${T} ${R} [ASSURED]`, 'close'],
    ['udp is not ours', `    [NEW] udp      17 30 ${T} [UNREPLIED] ${R}`, undefined],
    ['summary line', 'conntrack v1.4.7 (conntrack-tools): 12 flow events have been shown.', undefined],
  ];
  for (const [name, line, kind] of cases) {
    it(name, () => {
      const e = parseFlowEvent(line);
      assert.equal(e?.kind, kind);
      if (e) assert.equal(e.key, '198.18.1.10:40001');
    });
  }
});

describe('replay', () => {
  const open = (port: number): FlowEvent => ({ kind: 'open', key: `c:${port}`, line: '' });
  const close = (port: number): FlowEvent => ({ kind: 'close', key: `c:${port}`, line: '' });
  const cases: [string, FlowEvent[], { most: number; opened: number; stillOpen: number }][] = [
    ['empty', [], { most: 0, opened: 0, stillOpen: 0 }],
    ['sequential', [open(1), close(1), open(2), close(2)], { most: 1, opened: 2, stillOpen: 0 }],
    ['overlap of 3', [open(1), open(2), open(3), close(2), open(4), close(1), close(3), close(4)], { most: 3, opened: 4, stillOpen: 0 }],
    ['a close before its open is ignored (flow from before the slice)', [close(9), open(1), open(2)], { most: 2, opened: 2, stillOpen: 2 }],
    ['repeated close events count once', [open(1), close(1), close(1), open(2), open(3)], { most: 2, opened: 3, stillOpen: 2 }],
    ['a repeated NEW of an open flow is one flow', [open(1), open(1), close(1)], { most: 1, opened: 1, stillOpen: 0 }],
  ];
  for (const [name, events, want] of cases) {
    it(name, () => {
      assert.deepEqual(replayFlows(events), want);
    });
  }
});
