import CLua
import Foundation
import IMCore
import Logging

/// Loading, reloading and unloading plugins: a new version is compiled and `on_load`ed before it
/// replaces the running one.
extension PluginEngine {
    struct Source {
        var key: String
        var path: String
        var chunkName: String
        var fingerprint: String
    }

    private func readFingerprint(_ path: String) -> String {
        guard let d = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: d, as: UTF8.self)
    }

    private func folderFingerprint(_ dir: URL) -> String {
        let fm = FileManager.default
        guard let en = fm.enumerator(at: dir, includingPropertiesForKeys: nil) else { return "" }
        var parts: [(String, String)] = []
        for case let u as URL in en where u.pathExtension == "lua" {
            parts.append((u.path, readFingerprint(u.path)))
        }
        return parts.sorted { $0.0 < $1.0 }.map { "\($0.0)\n\($0.1)" }.joined(separator: "\u{0}")
    }

    /// Plugins present in the directory.
    func discover() -> [String: Source] {
        let fm = FileManager.default
        var out: [String: Source] = [:]
        guard let names = try? fm.contentsOfDirectory(atPath: directory.path) else { return out }
        for n in names.sorted() where !n.hasPrefix(".") {
            let url = directory.appendingPathComponent(n)
            var isDir: ObjCBool = false
            guard fm.fileExists(atPath: url.path, isDirectory: &isDir) else { continue }
            if isDir.boolValue {
                // `locales/` holds the single-file plugins' translations, never a plugin
                guard n != "lib", n != "locales", isValidPluginName(n) else { continue }
                let initURL = url.appendingPathComponent("init.lua")
                guard fm.fileExists(atPath: initURL.path) else { continue }
                out[n] = Source(
                    key: n, path: initURL.path, chunkName: "@\(n)/init.lua",
                    fingerprint: folderFingerprint(url) + localeFingerprint(forPlugin: initURL.path, key: n))
            } else if n.hasSuffix(".lua") {
                let key = String(n.dropLast(4))
                guard isValidPluginName(key), out[key] == nil else { continue }
                out[key] = Source(
                    key: key, path: url.path, chunkName: "@\(n)",
                    fingerprint: readFingerprint(url.path) + localeFingerprint(forPlugin: url.path, key: key))
            }
        }
        return out
    }

    /// Loads every plugin of the directory (same as `sync()` on a fresh runtime).
    @discardableResult
    public func loadAll() -> ReloadReport { sync() }

    /// Brings the loaded plugins in line with the directory: new files load,
    /// changed files reload, deleted files unload. Hot reload calls this.
    @discardableResult
    public func sync() -> ReloadReport {
        let found = discover()
        var report = ReloadReport()
        let liveKeys = Set(byKey.keys)
        let known = liveKeys.union(failedSources.keys)
        let fps = fingerprints
        for key in known.sorted() where found[key] == nil {
            report.merge(unload(key: key))
        }
        let libFP = folderFingerprint(directory.appendingPathComponent("lib"))
        let libChanged = libFP != libFingerprint
        libFingerprint = libFP
        for key in found.keys.sorted() {
            let src = found[key]!
            if fps[key] != src.fingerprint || libChanged || !known.contains(key) {
                report.merge(load(src))
            }
        }
        logReport(report)
        return report
    }

    /// Reloads one plugin (by plugin name or file name) even if unchanged;
    /// re-enables it if the circuit breaker had disabled it. A plugin whose
    /// file is gone is unloaded.
    @discardableResult
    public func reload(name: String) -> ReloadReport {
        let key = byKey.values.first(where: { $0.name == name })?.key ?? name
        disabledByAdmin.remove(key)
        let found = discover()
        var report = ReloadReport()
        if let src = found[key] {
            report = load(src)
        } else {
            report = unload(key: key)
            if report.unloaded.isEmpty {
                report.errors.append(HookError(plugin: name, hook: "load", reason: .io("no plugin named \(name) in \(directory.path)")))
            }
        }
        logReport(report)
        return report
    }

    /// Stops calling a plugin's hooks and timers until `enable(name:)`, across reloads. False when no
    /// plugin of that name is loaded.
    @discardableResult
    public func disable(name: String) -> Bool {
        guard let plugin = byKey.values.first(where: { $0.name == name }) else { return false }
        disabledByAdmin.insert(plugin.key)
        plugin.disabled = true
        logger.notice("plugin disabled by an admin", metadata: ["plugin": "\(name)"])
        return true
    }

    /// Calls a disabled plugin again (whoever disabled it) and resets its consecutive failures. False
    /// when no plugin of that name is loaded.
    @discardableResult
    public func enable(name: String) -> Bool {
        guard let plugin = byKey.values.first(where: { $0.name == name }) else { return false }
        disabledByAdmin.remove(plugin.key)
        plugin.disabled = false
        plugin.consecutiveFailures = 0
        logger.notice("plugin enabled", metadata: ["plugin": "\(name)"])
        return true
    }

    /// Reloads every plugin (and picks up new and deleted files).
    @discardableResult
    public func reloadAll() -> ReloadReport {
        let found = discover()
        var report = ReloadReport()
        let liveKeys = Set(byKey.keys)
        let known = liveKeys.union(failedSources.keys)
        for key in known.sorted() where found[key] == nil { report.merge(unload(key: key)) }
        libFingerprint = folderFingerprint(directory.appendingPathComponent("lib"))
        for key in found.keys.sorted() { report.merge(load(found[key]!)) }
        logReport(report)
        return report
    }

    /// Unloads one plugin (`on_unload`, timers cancelled, types unregistered).
    @discardableResult
    public func unload(name: String) -> ReloadReport {
        let key = byKey.values.first(where: { $0.name == name })?.key ?? name
        return unload(key: key)
    }

    /// Unloads every plugin.
    @discardableResult
    public func shutdown() -> ReloadReport {
        let keys = ordered.map(\.key)
        var report = ReloadReport()
        // Open dialogs stay recorded: the next start ends them and tells the members.
        for k in keys { report.merge(unload(key: k, endingDialogs: false)) }
        logReport(report)
        return report
    }

    private func logReport(_ report: ReloadReport) {
        for name in report.loaded { logger.info("plugin loaded", metadata: ["plugin": "\(name)"]) }
        for name in report.reloaded { logger.info("plugin reloaded", metadata: ["plugin": "\(name)"]) }
        for name in report.unloaded { logger.info("plugin unloaded", metadata: ["plugin": "\(name)"]) }
        for error in report.errors { logger.error("plugin load failed: \(error)", metadata: ["plugin": "\(error.plugin)"]) }
    }

    /// Compiles and `on_load`s a new instance, then swaps it in for the old one.
    private func load(_ src: Source) -> ReloadReport {
        var report = ReloadReport()
        let generation = (generations[src.key] ?? 0) + 1
        generations[src.key] = generation
        let settings = config

        guard let data = FileManager.default.contents(atPath: src.path) else {
            let e = HookError(plugin: src.key, hook: "load", reason: .io("cannot read \(src.path)"))
            return failed(src, e)
        }
        let source = String(decoding: data, as: UTF8.self)
        // Its translations (`ctx.t`): a bad locale file fails the load like a compile error.
        let catalog: LocaleCatalog
        do {
            catalog = try localeCatalog(forPlugin: src.path, key: src.key)
        } catch {
            return failed(src, error)
        }
        let plugin: LuaPlugin
        do {
            // the config is looked up by plugin name once the name is known;
            // the file name is used as a first guess
            plugin = try LuaPlugin(
                env: env, key: src.key, path: src.path, chunkName: src.chunkName, source: source,
                generation: generation, hostConfig: { name in settings[name] ?? settings[src.key] })
        } catch let e as HookError {
            return failed(src, e)
        } catch {
            let e = HookError(plugin: src.key, hook: "load", reason: .invalidPlugin("\(error)"))
            return failed(src, e)
        }
        plugin.usage = usage(of: plugin.name)
        plugin.catalog = catalog
        // unique names
        let clash = byKey.values.first(where: { $0.name == plugin.name && $0.key != src.key })
        if let clash {
            let e = HookError(
                plugin: plugin.name, hook: "load",
                reason: .invalidPlugin("name \(plugin.name) is already used by \(clash.path)"))
            plugin.close()
            return failed(src, e)
        }
        // on_load in the fresh state; the old version keeps serving events meanwhile
        if plugin.has(.onLoad) {
            // The new version's registrations replace the running version's; a failed load puts them back.
            let registered = env.registry.snapshot()
            let commands = env.commands.snapshot()
            if let e = plugin.invoke(.onLoad, timeout: limits.loadDeadline, { _ in 0 }) {
                env.registry.restore(registered)
                env.commands.restore(commands)
                plugin.close()
                return failed(src, e)
            }
            if let L = plugin.L { lua_settop(L, 0) }
            report.actions += plugin.takeActions()
        }
        // swap
        let old = byKey[src.key]
        byKey[src.key] = plugin
        if let old, let i = ordered.firstIndex(where: { $0 === old }) { ordered.remove(at: i) }
        ordered.append(plugin)
        ordered.sort { $0.priority != $1.priority ? $0.priority > $1.priority : $0.name < $1.name }
        if let old {
            report.actions += finishUnload(old)
        } else {
            report.actions += endInterruptedDialogs(of: plugin)
        }
        failedSources[src.key] = nil
        fingerprints[src.key] = src.fingerprint
        plugin.disabled = disabledByAdmin.contains(src.key)
        plugin.usage?.loaded(ok: true)
        if old != nil { report.reloaded.append(plugin.name) } else { report.loaded.append(plugin.name) }
        return report
    }

    private func usage(of name: String) -> PluginUsage {
        if let known = usage[name] { return known }
        let created = PluginUsage(plugin: name, factory: metrics)
        usage[name] = created
        return created
    }

    /// Records a failed load of `src` (the running version, if any, stays) and reports it.
    private func failed(_ src: Source, _ error: HookError) -> ReloadReport {
        usage(of: error.plugin).loaded(ok: false)
        fingerprints[src.key] = src.fingerprint // do not retry an unchanged broken file
        failedSources[src.key] = (src.path, error)
        return ReloadReport(errors: [error])
    }

    /// Runs `on_unload` and disposes of everything the instance owns.
    private func finishUnload(_ old: LuaPlugin, endingDialogs: Bool = true) -> [HookAction] {
        var actions: [HookAction] = endingDialogs ? endDialogs(of: old, why: "the plugin was reloaded") : []
        if old.has(.onUnload) {
            if let e = old.invoke(.onUnload, timeout: limits.loadDeadline, { _ in 0 }) {
                logger.error("\(e)", metadata: ["plugin": "\(old.name)"])
            }
            actions += old.takeActions()
        }
        env.registry.removeAll(owner: old.instanceID)
        env.commands.removeAll(owner: old.instanceID)
        old.close()
        return actions
    }

    private func unload(key: String, endingDialogs: Bool = true) -> ReloadReport {
        var report = ReloadReport()
        if let old = byKey.removeValue(forKey: key) {
            ordered.removeAll { $0 === old }
            report.actions += finishUnload(old, endingDialogs: endingDialogs)
            report.unloaded.append(old.name)
        }
        failedSources[key] = nil
        fingerprints[key] = nil
        return report
    }
}
