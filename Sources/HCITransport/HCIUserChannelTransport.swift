import Glibc
import HCI
import Scheduling

/// A Linux Bluetooth adapter (hciN) used through the kernel's HCI user channel: the kernel's own
/// host stack steps aside and we get the raw HCI packets. Each read and each write on the socket
/// is exactly one H4 frame. Opening needs CAP_NET_ADMIN and the adapter down.
public final class HCIUserChannelTransport: HCITransport {
    /// Constants from the Linux Bluetooth socket ABI.
    enum Kernel {
        static let addressFamilyBluetooth: Int32 = 31  // AF_BLUETOOTH
        static let protocolHCI: Int32 = 1  // BTPROTO_HCI
        static let channelUser: UInt16 = 1  // HCI_CHANNEL_USER
    }

    public let index: UInt16
    private let stream = DeferredStream()

    public init(index: UInt16) { self.index = index }

    var adapterName: String { "hci\(index)" }

    /// `struct sockaddr_hci { sa_family_t hci_family; unsigned short hci_dev; unsigned short
    /// hci_channel; }`: three native-endian 16-bit fields, 6 bytes, no padding.
    static func socketAddress(index: UInt16, channel: UInt16 = Kernel.channelUser) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(6)
        for field in [sa_family_t(Kernel.addressFamilyBluetooth), index, channel] {
            withUnsafeBytes(of: field) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// A readable reason for a failed `socket` or `bind` on the user channel, carrying the
    /// errno (CoreBluetooth turns it into a manager state). What the kernel's `hci_sock_bind`
    /// answers: EPERM without CAP_NET_ADMIN, ENODEV for no such index, EBUSY while the adapter is
    /// up (bluetoothd powered it) or initialising, EUSERS when another process has its user
    /// channel, ERFKILL when it is blocked.
    static func openError(index: UInt16, operation: String, errno code: Int32) -> HCITransportError {
        let adapter = "hci\(index)"
        let name = POSIX.errnoName(code)
        let message =
            switch code {
            case EAFNOSUPPORT, EPROTONOSUPPORT:
                "\(adapter): kernel has no Bluetooth support (\(name))"
            case EPERM, EACCES:
                "\(adapter): the HCI user channel needs CAP_NET_ADMIN: run as root or "
                    + "`setcap cap_net_admin+ep` the executable (\(name))"
            case ENODEV:
                "\(adapter): no such adapter (\(name))"
            case EBUSY:
                "\(adapter): adapter is up: run `hciconfig \(adapter) down` first (\(name))"
            case EUSERS:
                "\(adapter): another process has the adapter's user channel (\(name))"
            case EALREADY:
                "\(adapter): user channel already in use by another process (\(name))"
            case ERFKILL:
                "\(adapter): adapter is blocked by rfkill: `rfkill unblock bluetooth` (\(name))"
            default:
                "\(adapter): \(operation): \(POSIX.describe(code))"
            }
        return HCITransportError(message, errno: code)
    }

    /// Opens the raw HCI socket and binds it to the adapter's user channel.
    static func openSocket(index: UInt16) throws -> Int32 {
        let fd = socket(
            Kernel.addressFamilyBluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            Kernel.protocolHCI)
        guard fd >= 0 else { throw openError(index: index, operation: "socket", errno: errno) }
        let address = socketAddress(index: index)
        let bound = address.withUnsafeBytes { raw in
            bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw openError(index: index, operation: "bind", errno: code)
        }
        return fd
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) {
            let fd = try Self.openSocket(index: index)
            return try FileDescriptorStream(adopting: fd, name: adapterName, framing: .packetPerRead)
        }
    }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}
