// Hookbot console: pure formatting helpers (numbers, times, sizes, colours of names). No DOM.

export const plural = (n, word, many = `${word}s`) => `${n.toLocaleString()} ${n === 1 ? word : many}`;
export const formatNumber = (n) => (typeof n === 'number' ? n.toLocaleString() : '—');

export function formatTime(ms, withSeconds = false) {
  const date = new Date(ms);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: withSeconds ? '2-digit' : undefined });
  if (date.toDateString() === new Date().toDateString()) return time;
  return `${date.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${time}`;
}

export function formatBytes(bytes) {
  if (typeof bytes !== 'number') return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function formatMillis(ms) {
  if (!ms) return '0';
  if (ms < 0.01) return '<0.01';
  return ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : Math.round(ms).toLocaleString();
}

export function formatDuration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

/** A media length as m:ss (h:mm:ss past an hour). */
export function formatClock(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const two = (n) => String(n).padStart(2, '0');
  return s >= 3600 ? `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

/** A stable colour for a name (FNV-1a hash, spread by the golden ratio). */
export function hueOf(name) {
  let x = 0x811c9dc5;
  for (const ch of String(name)) x = Math.imul(x ^ ch.codePointAt(0), 0x01000193) >>> 0;
  return Math.round(((x * 0.618033988749895) % 1) * 360);
}

export function fileNameFromUrl(value) {
  try { return decodeURIComponent(new URL(value).pathname.split('/').pop() || ''); } catch { return ''; }
}

export const enc = encodeURIComponent;
