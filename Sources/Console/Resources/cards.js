/* Hookbot console: cards (`_lctype` 100, `_lcattrs.card`; docs/PLUGINS.md "Cards", docs/CLIENT.md "Cards").
 * A card renders with its title, text, image, fields, buttons, selects and inputs. A click sends the
 * button's signed token back as a cmd message `card.click` {plugin, card, action, value, token, form.<input>},
 * as any client does; the bot checks it and its plugin answers, typically with an edit of the card, which
 * re-renders it here (receivePatch). Other members' clicks show as a short line, not as raw cmd JSON.
 * An ES module: messages.js calls cardView and cardClickText. */

import { errorText } from './api.js';
import { h, toast } from './dom.js';
import { mediaUrl, onServer, safeUrl } from './media.js';
import { chat } from './state.js';

export const CARD_TYPE = 100;
export const CARD_ACTION = 'card.click';

/** The card of a typed message, or null. */
function cardOf(typed) {
  const attrs = typed && typed._lcattrs;
  const card = attrs && typeof attrs === 'object' ? attrs.card : null;
  return card && typeof card === 'object' && !Array.isArray(card) && typeof card.id === 'string' ? card : null;
}

const cardList = (value) => (Array.isArray(value) ? value.filter((item) => item && typeof item === 'object') : []);
const cardText = (value) => (typeof value === 'string' ? value : value == null ? '' : String(value));

/** Sends one click: the control's action and value with its token, and the card's inputs. */
async function clickCard(rec, card, control, button) {
  const form = {};
  const node = button.closest('.card');
  for (const input of node ? node.querySelectorAll('input[data-card-input]') : []) form[input.dataset.cardInput] = input.value;
  const ext = { plugin: card.plugin, card: card.id, action: control.action, value: control.value, token: control.token };
  for (const [name, text] of Object.entries(form)) ext[`form.${name}`] = text; // cmd message values are flat
  button.disabled = true;
  try {
    if (!chat.conn || !chat.conn.ready) throw new Error('Not connected to the server.');
    await chat.conn.request({ cmd: 'direct', cid: rec.cid, action: CARD_ACTION, ext });
    if (node) node.dataset.clicked = control.label || control.value;
  } catch (problem) {
    toast('error', 'The click was not sent', [errorText(problem)]);
  } finally {
    button.disabled = false;
  }
}

function cardImage(image) {
  const given = image && mediaUrl(image.url);
  if (!given) return null;
  const local = onServer(given);
  if (!local) return h('a', { class: 'card-link', href: safeUrl(given.href), target: '_blank', rel: 'noopener noreferrer', text: given.href });
  return h('img', { class: 'card-image', src: local.href, alt: '', loading: 'lazy' });
}

/** The card's node: what `describe` shows as the message's attachment. */
export function cardView(rec, typed) {
  const card = cardOf(typed);
  if (!card) return null;
  const fields = cardList(card.fields);
  const buttons = cardList(card.buttons);
  const selects = cardList(card.selects);
  const inputs = cardList(card.inputs);
  // Only the bot's cards are clickable: a member could post a look-alike card carrying a real card's
  // tokens under misleading labels.
  const fromBot = !chat.info || !chat.info.bot || rec.from === chat.info.bot;
  const controlButton = (control, label, extraClass = '') => {
    const usable = fromBot && typeof control.token === 'string' && control.disabled !== true;
    const title = !fromBot ? 'not sent by the bot' : control.only ? `only for ${[].concat(control.only).join(', ')}` : null;
    const button = h('button', {
      type: 'button', class: `card-button ${cardText(control.style) || 'secondary'} ${extraClass}`.trim(), text: label,
      disabled: !usable, title, dataset: { cardAction: cardText(control.action), cardValue: cardText(control.value) },
    });
    button.addEventListener('click', () => clickCard(rec, card, control, button));
    return button;
  };
  return h('div', { class: 'card', dataset: { cardId: card.id, cardPlugin: cardText(card.plugin) } },
    card.title != null ? h('div', { class: 'card-title', text: cardText(card.title) }) : null,
    card.text != null ? h('div', { class: 'card-text', text: cardText(card.text) }) : null,
    cardImage(card.image),
    fields.length ? h('dl', { class: 'card-fields' }, fields.map((f) => h('div', { class: f.inline ? 'card-field inline' : 'card-field' },
      h('dt', { text: cardText(f.name) }), h('dd', { text: cardText(f.value) })))) : null,
    inputs.length ? h('div', { class: 'card-inputs' }, inputs.map((input) => h('label', { class: 'card-input' },
      h('span', { text: cardText(input.label || input.name) }),
      h('input', { type: 'text', maxLength: Number(input.max) || 200, placeholder: cardText(input.placeholder), dataset: { cardInput: cardText(input.name) } })))) : null,
    selects.length ? h('div', { class: 'card-selects' }, selects.map((select) => h('div', { class: 'card-select', dataset: { cardAction: cardText(select.action) } },
      select.placeholder ? h('span', { class: 'card-placeholder', text: cardText(select.placeholder) }) : null,
      cardList(select.options).map((option) => controlButton(
        { ...option, action: select.action, disabled: select.disabled, only: select.only }, cardText(option.label), 'option'))))) : null,
    buttons.length ? h('div', { class: 'card-buttons' }, buttons.map((b) => controlButton(b, cardText(b.label)))) : null);
}

/** A member's click as the chat shows it: "clicked 寿司 on card lunch". */
export function cardClickText(rec) {
  const ext = rec.ext && typeof rec.ext === 'object' ? rec.ext : {};
  return `clicked ${cardText(ext.value)} on card ${cardText(ext.card)}`;
}
