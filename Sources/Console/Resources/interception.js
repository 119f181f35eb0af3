// Hookbot console: the Interception tab (GET /api/interception, /api/stats).

import { api, Token } from './api.js';
import { $, badge, h, showFormError } from './dom.js';
import { formatNumber } from './format.js';
import { pollPushes, renderPushStats } from './pushes.js';
import { pollRecentVerdicts } from './trace.js';

const VERDICT_LABELS = { allow: 'Allowed', block: 'Blocked', replace: 'Replaced' };
/** Label and hint of each counter the tab shows: the bot's statistics by name, the failure policy's decisions
 *  as `policy.<kind>`. */
const COUNTER_LABELS = {
  'policy.total': ['Decided by the policy', 'no usable verdict in time, so the failure policy decided'],
  'policy.declined': ['Declined', 'the bot answered “none” (could not review in time)'],
  'policy.invalid': ['Invalid answers', 'answers that were not a verdict'],
  'policy.delivered': ['Delivered by the policy', 'fail-open decisions'],
  'policy.refused': ['Refused by the policy', 'fail-closed decisions'],
  messages: ['Messages', 'stored messages the plugins saw'],
  blocked: ['Blocked', 'messages the plugins refused'],
  commands: ['Cmd messages', 'handled by on_cmd'],
  transients: ['Transient', 'handled by on_transient'],
  events: ['Events', 'membership changes and other events'],
  sent: ['Sent', 'messages the bot sent'],
  dropped: ['Dropped', 'bot messages not sent (loop guard, limits)'],
  rateLimited: ['Rate-limited', 'bot messages held back by the reply limits'],
  verdicts: ['Verdicts', 'interception requests the bot answered'],
  undecided: ['Undecided', 'answered “none”: the review ran out of time'],
  actionErrors: ['Action errors', 'plugin actions that failed'],
};
const counterLabel = (key, fallback = key) => (Object.hasOwn(COUNTER_LABELS, key) ? COUNTER_LABELS[key] : [fallback, '']);

export const interceptionView = { poller: null };

export function statTile(label, value, hint, tone = '') {
  return h('div', { class: `card stat ${tone}`.trim() },
    h('span', { class: 'label', text: label }),
    h('span', { class: 'value', text: formatNumber(value) }),
    hint ? h('span', { class: 'hint', text: hint }) : null);
}

function headItem(label, value) {
  return h('div', { class: 'item' }, h('span', { class: 'label', text: label }), h('span', { class: 'value' }, value));
}

export async function pollInterception() {
  if (!Token.get()) return;
  const notice = $('#interception-error');
  try {
    const [interception, stats] = await Promise.all([api('/api/interception', { admin: true }), api('/api/stats', { admin: true })]);
    renderInterception(interception || {});
    renderStats(stats || {});
    await pollRecentVerdicts();
    await pollPushes();
    renderPushStats();
    showFormError(notice, '');
  } catch (error) {
    if (error.status !== 401) showFormError(notice, `Could not read the interception counters: ${error.reason}`);
  }
}

function renderInterception(ic) {
  const policy = ic.policy || '—';
  const closed = /closed/.test(policy);
  const head = h('div', { class: 'card interception-head' },
    headItem('Interceptor', ic.interceptor || '—'),
    headItem('Attached', ic.attached == null ? '—' : badge(ic.attached ? 'attached' : 'not attached', ic.attached ? 'ok' : 'danger')),
    headItem('Failure policy', badge(policy, closed ? 'warn' : 'info')),
    headItem('Deadline', ic.deadlineMillis != null ? `${formatNumber(ic.deadlineMillis)} ms` : '—'),
    ic.reviewsInFlight != null ? headItem('Reviews in flight', formatNumber(ic.reviewsInFlight)) : null);
  const parts = [head];
  if (ic.requests == null) {
    parts.push(h('p', { class: 'notice info', text: 'The IM server runs in another process, so only the bot\'s side of interception is known here.' }));
  } else {
    const verdicts = ic.verdicts || {};
    const tiles = [statTile('Requests', ic.requests, 'messages and membership changes sent for review')];
    for (const [kind, count] of Object.entries(verdicts)) tiles.push(statTile(VERDICT_LABELS[kind] || kind, count, `verdict “${kind}”`, kind === 'block' && count ? 'bad' : ''));
    tiles.push(statTile('Timeouts', ic.timeouts, 'no verdict within the deadline', ic.timeouts ? 'bad' : ''));
    for (const [kind, count] of Object.entries(ic.policyDecisions || {})) {
      const [label, hint] = counterLabel(`policy.${kind}`, `Policy: ${kind}`);
      tiles.push(statTile(label, count, hint, count ? 'bad' : ''));
    }
    parts.push(h('div', { class: 'stat-grid' }, tiles));
    const total = Object.values(verdicts).reduce((sum, n) => sum + (Number(n) || 0), 0);
    const colour = (kind) => (kind === 'allow' ? 'c-allow' : kind === 'block' ? 'c-block' : kind === 'replace' ? 'c-replace' : 'c-other');
    parts.push(h('div', { class: 'card verdict-card' },
      h('h3', { text: `Verdicts by kind · ${formatNumber(total)}` }),
      h('div', { class: 'verdict-bar', attrs: { role: 'img', 'aria-label': Object.entries(verdicts).map(([k, n]) => `${k} ${n}`).join(', ') } },
        total ? Object.entries(verdicts).filter(([, n]) => n > 0).map(([kind, n]) => {
          const bar = h('span', { class: colour(kind), title: `${kind}: ${n}` });
          bar.style.width = `${(100 * n) / total}%`;
          return bar;
        }) : null),
      h('div', { class: 'verdict-legend' }, Object.entries(verdicts).map(([kind, n]) => h('span', {},
        h('span', { class: `swatch ${colour(kind)}` }), `${VERDICT_LABELS[kind] || kind} ${formatNumber(n)}${total ? ` (${Math.round((100 * n) / total)}%)` : ''}`)))));
  }
  if (ic.bot && typeof ic.bot === 'object') {
    parts.push(h('div', {}, h('h3', { class: 'subhead', text: `The bot (${ic.interceptor || 'interceptor'})` }),
      h('div', { class: 'stat-grid' }, Object.entries(ic.bot).map(([key, value]) => {
        const [label, hint] = counterLabel(key);
        return statTile(label, value, hint);
      }))));
  }
  $('#interception-summary').replaceChildren(...parts);
}

function renderStats(stats) {
  $('#bot-stats').replaceChildren(...Object.entries(stats).map(([key, value]) => {
    const [label, hint] = counterLabel(key);
    const bad = ['actionErrors', 'dropped', 'undecided'].includes(key) && value > 0;
    return statTile(label, value, hint, bad ? 'bad' : '');
  }));
}
