import Glibc

/// Small wrappers over the C calls the transports make, turning errno into readable errors.
enum POSIX {
    /// The symbolic name of an errno value (`ECONNREFUSED`), for error messages people can search.
    static func errnoName(_ code: Int32) -> String {
        switch code {
        case EPERM: "EPERM"
        case ENOENT: "ENOENT"
        case EINTR: "EINTR"
        case EIO: "EIO"
        case ENXIO: "ENXIO"
        case EBADF: "EBADF"
        case EAGAIN: "EAGAIN"
        case EACCES: "EACCES"
        case EBUSY: "EBUSY"
        case ENODEV: "ENODEV"
        case ENOTDIR: "ENOTDIR"
        case EINVAL: "EINVAL"
        case ENOTTY: "ENOTTY"
        case EPIPE: "EPIPE"
        case ENOTSOCK: "ENOTSOCK"
        case EPROTONOSUPPORT: "EPROTONOSUPPORT"
        case EAFNOSUPPORT: "EAFNOSUPPORT"
        case EADDRINUSE: "EADDRINUSE"
        case EADDRNOTAVAIL: "EADDRNOTAVAIL"
        case ENETUNREACH: "ENETUNREACH"
        case ECONNABORTED: "ECONNABORTED"
        case ECONNRESET: "ECONNRESET"
        case ENOTCONN: "ENOTCONN"
        case ETIMEDOUT: "ETIMEDOUT"
        case ECONNREFUSED: "ECONNREFUSED"
        case EHOSTUNREACH: "EHOSTUNREACH"
        case EALREADY: "EALREADY"
        case EINPROGRESS: "EINPROGRESS"
        case ERFKILL: "ERFKILL"
        case EUSERS: "EUSERS"
        default: "errno \(code)"
        }
    }

    /// "strerror (ENAME)", e.g. "Connection refused (ECONNREFUSED)".
    static func describe(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (\(errnoName(code)))"
    }

    /// An error for a failed call, with what was being done: "connect to 127.0.0.1:9: …".
    static func error(_ what: String, _ code: Int32 = errno) -> HCITransportError {
        HCITransportError("\(what): \(describe(code))", errno: code)
    }

    static func setNonBlocking(_ fd: Int32) throws {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw error("fcntl(O_NONBLOCK)")
        }
    }

    static func setCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
    }

    /// A close-on-exec, non-blocking pipe: `(read end, write end)`.
    static func makePipe() throws -> (Int32, Int32) {
        // pipe2 needs _GNU_SOURCE, which Swift's Glibc module doesn't import.
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw error("pipe") }
        for fd in fds {
            setCloseOnExec(fd)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    /// Waits until `fd` is ready for `events` or `wakeFD` becomes readable (-1 for `fd`: only
    /// the wake-up), for at most `timeoutMilliseconds` (-1: no limit). Returns false when woken
    /// (the owner is closing), true when ready or timed out.
    static func waitReady(_ fd: Int32, events: Int16, orWake wakeFD: Int32, timeoutMilliseconds: Int32 = -1) -> Bool {
        var fds = [
            pollfd(fd: fd, events: events, revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, timeoutMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if fds[1].revents != 0 { return false }
            if ready == 0 || fds[0].revents != 0 { return true }
        }
    }

    static let socketStream = Int32(SOCK_STREAM.rawValue)
}
