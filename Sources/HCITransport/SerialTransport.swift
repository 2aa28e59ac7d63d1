import Glibc
import HCI
import Scheduling

/// H4 over a UART (Core spec Vol 4 Part A): a controller on a serial port or USB-serial adapter
/// (Zephyr `hci_uart`, nRF/ESP boards). The port is set to raw 8N1 at `baudRate`, with RTS/CTS
/// hardware flow control unless turned off. Opens the device in `open`.
public final class SerialTransport: HCITransport {
    public let device: String
    public let baudRate: Int
    public let flowControl: Bool
    private let stream = DeferredStream()

    /// The rates `cfsetspeed` accepts on Linux, and their `speed_t` codes.
    static let speeds: [Int: speed_t] = [
        1200: speed_t(B1200), 2400: speed_t(B2400), 4800: speed_t(B4800), 9600: speed_t(B9600),
        19200: speed_t(B19200), 38400: speed_t(B38400), 57600: speed_t(B57600),
        115_200: speed_t(B115200), 230_400: speed_t(B230400), 460_800: speed_t(B460800),
        500_000: speed_t(B500000), 576_000: speed_t(B576000), 921_600: speed_t(B921600),
        1_000_000: speed_t(B1000000), 1_152_000: speed_t(B1152000), 1_500_000: speed_t(B1500000),
        2_000_000: speed_t(B2000000), 2_500_000: speed_t(B2500000), 3_000_000: speed_t(B3000000),
        3_500_000: speed_t(B3500000), 4_000_000: speed_t(B4000000),
    ]

    /// The standard baud rates, slowest first.
    public static var supportedBaudRates: [Int] { speeds.keys.sorted() }

    /// The rate used when none is given: the usual rate of UART controllers with flow control.
    public static let defaultBaudRate = 1_000_000

    /// Throws for a rate that isn't one of `supportedBaudRates`.
    public init(device: String, baudRate: Int = SerialTransport.defaultBaudRate, flowControl: Bool = true) throws {
        guard Self.speeds[baudRate] != nil else {
            throw HCITransportError(
                "\(device): unsupported baud rate \(baudRate); use one of "
                    + Self.supportedBaudRates.map(String.init).joined(separator: ", "))
        }
        self.device = device
        self.baudRate = baudRate
        self.flowControl = flowControl
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try stream.open(on: loop, sink: sink) {
            // O_NONBLOCK so that opening doesn't wait for carrier detect; O_NOCTTY so the port
            // doesn't become our controlling terminal.
            let fd = Glibc.open(device, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { throw POSIX.error("open \(device)") }
            do {
                try configure(fd)
            } catch {
                Glibc.close(fd)
                throw error
            }
            return try FileDescriptorStream(adopting: fd, name: "serial \(device)")
        }
    }

    /// Raw mode 8N1 at the requested speed; drops whatever was received before we opened.
    private func configure(_ fd: Int32) throws {
        var options = termios()
        guard tcgetattr(fd, &options) == 0 else { throw POSIX.error("\(device): tcgetattr") }
        cfmakeraw(&options)
        options.c_cflag &= ~tcflag_t(CSIZE | PARENB | CSTOPB)
        options.c_cflag |= tcflag_t(CS8 | CLOCAL | CREAD)
        if flowControl {
            options.c_cflag |= tcflag_t(CRTSCTS)
        } else {
            options.c_cflag &= ~tcflag_t(CRTSCTS)
        }
        options.c_iflag &= ~tcflag_t(IXON | IXOFF | IXANY)
        guard cfsetspeed(&options, Self.speeds[baudRate]!) == 0 else {
            throw POSIX.error("\(device): cfsetspeed \(baudRate)")
        }
        guard tcsetattr(fd, TCSANOW, &options) == 0 else { throw POSIX.error("\(device): tcsetattr") }
        _ = tcflush(fd, TCIOFLUSH)
    }

    public func send(_ packet: HCIPacket) { stream.send(packet) }
    public func close() { stream.close() }
}
