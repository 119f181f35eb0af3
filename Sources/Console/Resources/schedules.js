// Hookbot console: the plugins' schedules (ctx.schedule) under the Plugins tab. Lists every job
// (GET /api/schedules) with its next run, and cancels one (DELETE /api/schedules/{plugin}/{id}).
// An ES module: pollPlugins (plugins.js) calls pollSchedules.

import { api, errorText } from './api.js';
import { $, h, showFormError, toast } from './dom.js';

/** "in 5 min", "in 2 h", "3 d ago": how far a time (epoch seconds) is from now. */
function scheduleRelative(seconds) {
  const delta = seconds - Date.now() / 1000;
  const abs = Math.abs(delta);
  const text = abs < 90 ? `${Math.round(abs)} s` : abs < 5400 ? `${Math.round(abs / 60)} min`
    : abs < 172800 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86400)} d`;
  return delta >= 0 ? `in ${text}` : `${text} ago`;
}

function scheduleWhen(job) {
  if (job.kind === 'cron') return `cron ${job.spec}`;
  if (job.kind === 'every') return `every ${job.spec} s`;
  return `at ${job.spec}`;
}

export async function pollSchedules() {
  const notice = $('#schedules-error');
  let view;
  try {
    view = await api('/api/schedules', { admin: true });
  } catch (error) {
    if (error.status !== 401) showFormError(notice, `Could not load the schedules: ${errorText(error)}`);
    return;
  }
  showFormError(notice, '');
  const rows = [];
  for (const plugin of view.plugins || []) {
    for (const job of plugin.jobs) rows.push(scheduleRow(plugin, job));
  }
  $('#schedules-summary').textContent = view.total === 1 ? '1 job' : `${view.total} jobs`;
  $('#schedule-rows').replaceChildren(...rows);
  $('#schedules-empty').hidden = rows.length > 0;
  $('#schedules-table').hidden = rows.length === 0;
}

function scheduleRow(plugin, job) {
  const next = new Date(job.next * 1000);
  const cancel = h('button', { type: 'button', class: 'small schedule-cancel', text: 'Cancel',
    attrs: { 'aria-label': `Cancel schedule ${job.id} of ${plugin.plugin}` },
    on: { click: (event) => cancelSchedule(plugin.plugin, job.id, event.currentTarget) } });
  const data = JSON.stringify(job.data);
  return h('tr', { dataset: { plugin: plugin.plugin, id: job.id } },
    h('td', {}, h('code', { text: plugin.plugin }), plugin.loaded ? '' : h('span', { class: 'muted small', text: ' (not loaded)' })),
    h('td', {}, h('code', { text: job.id })),
    h('td', {}, h('code', { text: scheduleWhen(job) }), h('span', { class: 'muted small', text: ` ${job.tz}` })),
    h('td', {}, h('code', { text: job.fn })),
    h('td', { title: next.toISOString() }, `${next.toLocaleString()} `, h('span', { class: 'muted small', text: scheduleRelative(job.next) })),
    h('td', { class: 'num' }, String(job.runs)),
    h('td', { text: job.missed }),
    h('td', {}, h('code', { text: data && data.length > 120 ? `${data.slice(0, 120)}…` : (data || '') })),
    h('td', {}, cancel));
}

async function cancelSchedule(plugin, id, button) {
  button.disabled = true;
  try {
    await api(`/api/schedules/${encodeURIComponent(plugin)}/${encodeURIComponent(id)}`, { method: 'DELETE', admin: true });
    toast('ok', `Schedule ${id} of ${plugin} cancelled`);
  } catch (error) {
    toast('error', `Schedule ${id} of ${plugin} could not be cancelled`, [errorText(error)]);
  }
  button.disabled = false;
  await pollSchedules();
}
