import Foundation

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

/// write(2), which `AtomicFile.write` hides inside the enum.
private func posixWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(fd, bytes, count) }
