// Hookbot console: DOM helpers. All user and plugin text goes into the page with textContent (through h()),
// never as HTML.

import { hueOf } from './format.js';

export const $ = (selector, root = document) => root.querySelector(selector);

/** Creates an element. Props: class, text, dataset, attrs, on (listeners), or any DOM property.
 *  Children are nodes or strings (inserted as text). */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key === 'attrs') for (const [name, v] of Object.entries(value)) { if (v != null) node.setAttribute(name, v); }
    else if (key === 'on') for (const [name, listener] of Object.entries(value)) node.addEventListener(name, listener);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function avatar(name, small = false) {
  const node = h('span', { class: small ? 'avatar small' : 'avatar', text: ([...String(name || '?').trim()][0] || '?').toUpperCase(), attrs: { 'aria-hidden': 'true' } });
  node.style.setProperty('--hue', hueOf(name));
  return node;
}

/** replaceChildren without the null / false children (which it would print). */
export const fill = (node, ...children) => node.replaceChildren(...children.flat().filter((child) => child != null && child !== false));

/** Small line icons (inline SVG, so no emoji font is needed). */
const ICON_PATHS = {
  image: 'M3 5h18v14H3z M3 16l5-5 4 4 3-3 6 6 M15.5 9.5a1.5 1.5 0 1 0 0-.01',
  file: 'M6 2h9l5 5v15H6z M14 2v6h6',
  audio: 'M9 18V5l12-2v13 M9 18a3 3 0 1 1-6 0a3 3 0 1 1 6 0 M21 16a3 3 0 1 1-6 0a3 3 0 1 1 6 0',
  video: 'M2 6h14v12H2z M16 10l6-4v12l-6-4',
  location: 'M12 22s7-6.5 7-12a7 7 0 1 0-14 0c0 5.5 7 12 7 12z M12 12.5a2.5 2.5 0 1 0 0-5a2.5 2.5 0 1 0 0 5',
};
export function icon(name) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('class', 'icon');
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', ICON_PATHS[name]);
  svg.append(path);
  return svg;
}

export const badge = (text, kind = '') => h('span', { class: `badge ${kind}`.trim(), text });

export function showFormError(node, message) {
  node.textContent = message || '';
  node.hidden = !message;
}

export function toast(kind, title, lines = [], timeout = kind === 'error' ? 10000 : 5000) {
  const box = $('#toasts');
  const close = h('button', { type: 'button', text: '×', attrs: { 'aria-label': 'Dismiss' } });
  const node = h('div', { class: `toast ${kind}`, attrs: { role: kind === 'error' ? 'alert' : 'status' } },
    h('div', { class: 'toast-body' }, h('strong', { text: title }), lines.length ? h('ul', {}, lines.map((line) => h('li', { text: line }))) : null),
    close);
  close.addEventListener('click', () => node.remove());
  box.append(node);
  while (box.childElementCount > 5) box.firstElementChild.remove();
  setTimeout(() => node.remove(), timeout);
}
