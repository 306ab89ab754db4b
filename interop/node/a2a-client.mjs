// An A2A client built with the official A2A JavaScript SDK (@a2a-js/sdk),
// for the interop tests: it reads the card at BASE_URL, sends GOAL as a
// streamed message (Authorization: Bearer TOKEN), prints one JSON line per
// event, then reads the task back with getTask and prints it. Usage:
//   node a2a-client.mjs BASE_URL TOKEN GOAL
import { webcrypto } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

// Node 18 (Debian 12's) has no global crypto, which the SDK uses.
if (!globalThis.crypto) globalThis.crypto = webcrypto;

const [base, token, goal] = process.argv.slice(2);
const authFetch = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  if (token) headers.set('Authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const texts = (parts) => (parts || []).map((p) => (p.content && p.content.$case === 'text' ? p.content.value : '')).join('');
const state = (s) => (s ? TaskState[s.state] : undefined);

try {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch, legacyCompat: { enabled: true } })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch, legacyCompat: { enabled: true } }),
  }));
  const client = await factory.createFromUrl(base);
  const card = client.agentCard ?? undefined;
  out({ card: card && card.name });
  const message = {
    messageId: crypto.randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: goal }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  };
  let taskId = '';
  for await (const ev of client.sendMessageStream({ tenant: '', message, configuration: undefined, metadata: undefined })) {
    const p = ev.payload;
    if (!p) continue;
    switch (p.$case) {
      case 'task': taskId = p.value.id; out({ kind: 'task', state: state(p.value.status), goal_id: p.value.metadata && p.value.metadata.ioa_goal_id }); break;
      case 'statusUpdate': out({ kind: 'status', state: state(p.value.status), text: texts(p.value.status && p.value.status.message && p.value.status.message.parts) }); break;
      case 'artifactUpdate': out({ kind: 'artifact', name: p.value.artifact.name, text: texts(p.value.artifact.parts) }); break;
      case 'message': out({ kind: 'message', text: texts(p.value.parts) }); break;
      default: out({ kind: p.$case });
    }
  }
  const task = await client.getTask({ tenant: '', id: taskId, historyLength: 0 });
  out({ final: { state: state(task.status), artifacts: (task.artifacts || []).map((a) => texts(a.parts)) } });
  process.exit(0);
} catch (err) {
  out({ error: String(err && err.message ? err.message : err) });
  process.exit(1);
}
