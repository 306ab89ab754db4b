// An A2A agent built with the official A2A JavaScript SDK (@a2a-js/sdk,
// v1.0 with its v0.3 compatibility layer on), for the interop tests: it
// "shouts" the first line of a message (upper case). A message with
// "refuse" fails the task; one with "question" asks for input. With
// A2A_TOKEN set, calls must carry Authorization: Bearer <token>.
// It prints "listening <port>" once it serves.
import { webcrypto } from 'node:crypto';
import express from 'express';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

// Node 18 (Debian 12's) has no global crypto, which the SDK uses.
if (!globalThis.crypto) globalThis.crypto = webcrypto;

const token = process.env.A2A_TOKEN || '';
const app = express();
const server = app.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  const port = server.address().port;
  const url = `http://127.0.0.1:${port}/a2a/jsonrpc`;
  const card = {
    name: 'shouter',
    description: 'Shouts a text back: rewrites it in capital letters (upper case).',
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3', tenant: '' },
    ],
    provider: { url: 'https://example.com', organization: 'interop tests' },
    version: '1.0.0',
    capabilities: { streaming: process.env.A2A_STREAMING !== 'off', pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{
      id: 'shout', name: 'shout a text in capital letters',
      description: 'Rewrites a text in upper case letters, as if shouted.',
      tags: ['upper case', 'capital letters', 'text'], examples: ['shout hello'],
      inputModes: [], outputModes: [], securityRequirements: [],
    }],
    signatures: [],
  };
  const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
  const status = (taskId, contextId, state, message) => AgentEvent.statusUpdate({
    taskId, contextId, metadata: undefined,
    status: {
      state, timestamp: new Date().toISOString(),
      message: message && {
        messageId: crypto.randomUUID(), contextId, taskId, role: Role.ROLE_AGENT,
        parts: [text(message)], metadata: undefined, extensions: [], referenceTaskIds: [],
      },
    },
  });
  const executor = {
    async execute(ctx, bus) {
      const { taskId, contextId } = ctx;
      const input = ctx.userMessage.parts.map((p) => (p.content && p.content.$case === 'text' ? p.content.value : '')).join('\n');
      bus.publish(AgentEvent.task({
        id: taskId, contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
      }));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, 'taking a deep breath'));
      if (/refuse/i.test(input)) {
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_FAILED, 'I refuse to shout that'));
      } else if (/question/i.test(input)) {
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'Which language should I shout in?'));
      } else {
        // With results of earlier tasks (as ioa sends them), shout the last.
        const earlier = input.split('\n').filter((l) => l.startsWith('- ')).pop();
        const line = earlier ? earlier.slice(earlier.indexOf('): ') + 3) : input.split('\n')[0].replace(/^shout\s+/i, '');
        bus.publish(AgentEvent.artifactUpdate({
          taskId, contextId, append: false, lastChunk: true, metadata: undefined,
          artifact: { artifactId: 'shout-1', name: 'shout', description: '', parts: [text(line.toUpperCase() + '!')], metadata: undefined, extensions: [] },
        }));
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
      }
      bus.finished();
    },
    async cancelTask(taskId, bus) {
      bus.publish(status(taskId, '', TaskState.TASK_STATE_CANCELED, 'cancelled'));
      bus.finished();
    },
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true } }));
  app.use('/a2a/jsonrpc', (req, res, next) => {
    if (token && req.get('authorization') !== `Bearer ${token}`) {
      res.status(401).json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'unauthorized' } });
      return;
    }
    next();
  });
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  console.log(`listening ${port}`);
});
process.stdin.on('end', () => process.exit(0)); // the test ends: stop
process.stdin.resume();
