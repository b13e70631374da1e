/**
 * Answer bodies: the answer, authority and additional records of one
 * response, encoded once by dns2 and reused for every query that gets the
 * same answer (same name, type and, for steered names, the same choice).
 *
 * Layout invariant: a response is
 *   header (12) | question (copied from the query) | body | OPT (per query)
 * and a body is encoded by dns2 behind a question of the same name, so its
 * compression pointers point into the question at offset 12 and stay valid
 * behind any query for that name, whatever the case of its letters (0x20
 * randomisation is preserved). Names that do not round-trip through a
 * dotted string (ParsedQuery.oddName) are encoded under a stand-in of the
 * same label lengths ('x' for every odd octet): pointers to their suffixes
 * land on identical octets, and a record owned by the query name itself
 * (wildcard synthesis) is written as a pointer to the question.
 */
import dns2 from 'dns2';
import { GENERIC_TYPE, type RR } from '../zone/records.ts';

const { Packet } = dns2;

export interface Body {
  readonly bytes: Buffer;
  readonly an: number;
  readonly ns: number;
  readonly ar: number;
  readonly rcode: number;
  readonly aa: boolean;
}

export interface Sections {
  readonly answer: readonly RR[];
  readonly authority: readonly RR[];
  readonly additional: readonly RR[];
}


/** The dotted name dns2 will encode with the same octet layout as the query's name. */
export function standInName(name: string, odd: boolean): string {
  if (!odd) return name;
  let s = '';
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    s += c === 0x2e ? '.' : c < 0x21 || c >= 0x7f ? 'x' : String.fromCharCode(c);
  }
  return s;
}

/**
 * Encodes the sections behind a question for `name` (the query's lowercase
 * key) and returns only the body octets. Throws on records dns2 cannot
 * encode (a bug in zone data validation): the caller answers SERVFAIL.
 */
export function encodeBody(name: string, odd: boolean, qtype: number, sections: Sections, rcode: number, aa: boolean): Body {
  const qname = standInName(name, odd);
  // dns2's typings describe its classes; its encoder takes plain records
  // with the rdata fields of zone/records.ts, which is what RR is, except a
  // GenericRecord: dns2 gets its real type, which has no dns2 codec (the
  // parser refuses the others), so dns2 copies its `data` as the RDATA.
  const rename = (rr: RR): unknown => {
    const r = odd && rr.name === name ? { ...rr, name: qname } : rr;
    return r.type === GENERIC_TYPE ? { ...r, type: r.rrtype } : r;
  };
  const packet = new Packet() as unknown as { questions: unknown[]; answers: unknown[]; authorities: unknown[]; additionals: unknown[]; toBuffer(): Buffer };
  packet.questions.push({ name: qname, type: qtype, class: 1 });
  packet.answers.push(...sections.answer.map(rename));
  packet.authorities.push(...sections.authority.map(rename));
  packet.additionals.push(...sections.additional.map(rename));
  const wire = packet.toBuffer();
  const questionLength = (qname === '' ? 1 : Buffer.byteLength(qname, 'latin1') + 2) + 4;
  return {
    bytes: Buffer.from(wire.subarray(12 + questionLength)),
    an: sections.answer.length,
    ns: sections.authority.length,
    ar: sections.additional.length,
    rcode,
    aa,
  };
}
