import Foundation
import Scheduling

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replacing a file so that a crash or a kill at any moment leaves either the old or the new
/// content, complete: the new content goes to a temporary file in the same directory (so the
/// rename stays within one file system), is fsynced before the rename (else the rename can
/// reach the disk before the data, leaving an empty or short file after a power loss), and the
/// directory is fsynced after it (so the rename itself is durable).
enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        var step: String
        var code: Int32
        var description: String { "\(step): \(String(cString: strerror(code)))" }
    }

    /// `.<name>.tmp-`: hidden, and followed by the writer's pid so that a later run can tell a
    /// dead writer's leftovers from a live one's file.
    static func temporaryPrefix(for url: URL) -> String { ".\(url.lastPathComponent).tmp-" }

    /// Writes `data` to `url` (mode 0600) atomically.
    static func write(_ data: Data, to url: URL) throws {
        let directory = url.deletingLastPathComponent().path
        let temporary = "\(directory)/\(temporaryPrefix(for: url))\(getpid())-\(UInt32.random(in: .min ... .max))"
        // O_EXCL: never write through a file (or link) someone else put there; 0600 from the start,
        // so the key material is never readable by others even for a moment.
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(step: "create \(temporary)", code: errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            // The umask cannot loosen 0600, but a surprising one could tighten it below 0600.
            guard fchmod(fd, 0o600) == 0 else { throw Failure(step: "chmod", code: errno) }
            try data.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let n = posixWrite(fd, buffer.baseAddress! + offset, buffer.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw Failure(step: "write", code: errno)
                    }
                    offset += n
                }
            }
            guard fsync(fd) == 0 else { throw Failure(step: "fsync", code: errno) }
        }
        guard rename(temporary, url.path) == 0 else { throw Failure(step: "rename to \(url.path)", code: errno) }
        renamed = true
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw Failure(step: "open \(directory)", code: errno) }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw Failure(step: "fsync \(directory)", code: errno) }
    }
}

extension AtomicFile {
    /// Removes the temporary files of writers of `url` that were killed before their rename.
    /// A live process's (another store open on the same file) is left alone.
    static func removeStaleTemporaryFiles(for url: URL) {
        let directory = url.deletingLastPathComponent()
        let prefix = temporaryPrefix(for: url)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            let pid = name.dropFirst(prefix.count).prefix { $0 != "-" }
            if let pid = pid_t(pid), pid != getpid(), kill(pid, 0) == 0 || errno == EPERM { continue }
            unlink(directory.appendingPathComponent(name).path)
        }
    }
}

/// A store whose writes wait on a queue of its own.
protocol FlushedAtExit: AnyObject, Sendable {
    /// Waits until every change made before the call is written.
    func flush()
}

/// The stores with a file, flushed when the process exits normally: a tool that pairs (or
/// meets a device) and returns from `main` at once would otherwise lose the write still
/// queued, as nothing waits for a writer queue at exit.
enum FlushAtExit {
    private struct OpenStore: @unchecked Sendable {
        // @unchecked: a weak reference to a Sendable class, only read under `openStores`' lock.
        weak var store: (any FlushedAtExit)?
    }

    private static let openStores = Locked<[OpenStore]>([])
    private static let exitHandler: Void = { atexit { FlushAtExit.flushAll() } }()

    static func register(_ store: any FlushedAtExit) {
        _ = exitHandler
        openStores.withLock { stores in
            stores.removeAll { $0.store == nil }
            stores.append(OpenStore(store: store))
        }
    }

    private static func flushAll() {
        let stores = openStores.withLock { $0.compactMap(\.store) }
        for store in stores { store.flush() }
    }
}

/// write(2), which `AtomicFile.write` hides inside the enum.
private func posixWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(fd, bytes, count) }
