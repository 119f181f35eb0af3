// Hookbot console: a poller that runs a task now and then every few seconds, one run at a time. No DOM.

/** Runs a task now and then every `interval` ms, one run at a time, while started. */
export class Poller {
  constructor(task, interval) {
    this.task = task;
    this.interval = interval;
    this.running = false;
    this.busy = false;
    this.again = false;
    this.timer = null;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.run();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Runs again as soon as possible (after the current run, if one is under way). */
  now() {
    if (!this.running) return;
    clearTimeout(this.timer);
    this.run();
  }

  async run() {
    if (this.busy) { this.again = true; return; }
    this.busy = true;
    try { await this.task(); } catch (error) { console.error(error); }
    this.busy = false;
    if (!this.running) return;
    if (this.again) { this.again = false; this.run(); return; }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), this.interval);
  }
}
