import Glibc
import HCI
import HCITesting
@testable import HCITransport
import Scheduling
import TestTools
import Testing

struct HCIUserChannelTests {
    @Test func socketAddressLayout() {
        // struct sockaddr_hci: hci_family = AF_BLUETOOTH (31), hci_dev, hci_channel =
        // HCI_CHANNEL_USER (1), each a native (here little-endian) 16-bit field.
        #expect(HCIUserChannelTransport.socketAddress(index: 0) == [31, 0, 0, 0, 1, 0])
        #expect(HCIUserChannelTransport.socketAddress(index: 0x0102) == [31, 0, 0x02, 0x01, 1, 0])
        #expect(HCIUserChannelTransport.socketAddress(index: 1, channel: 0) == [31, 0, 1, 0, 0, 0])
    }

    @Test(arguments: [
        (EAFNOSUPPORT, "hci0: kernel has no Bluetooth support (EAFNOSUPPORT)"),
        (EPERM, "hci0: the HCI user channel needs CAP_NET_ADMIN: run as root or `setcap cap_net_admin+ep` the executable (EPERM)"),
        (EACCES, "hci0: the HCI user channel needs CAP_NET_ADMIN: run as root or `setcap cap_net_admin+ep` the executable (EACCES)"),
        (ENODEV, "hci0: no such adapter (ENODEV)"),
        (EBUSY, "hci0: adapter is up: run `hciconfig hci0 down` first (EBUSY)"),
        (EALREADY, "hci0: user channel already in use by another process (EALREADY)"),
        (EUSERS, "hci0: another process has the adapter's user channel (EUSERS)"),
        (EINVAL, "hci0: bind: Invalid argument (EINVAL)"),
    ])
    func errorMapping(code: Int32, message: String) {
        let error = HCIUserChannelTransport.openError(index: 0, operation: "bind", errno: code)
        #expect(error.message == message)
        // The number travels with the message, for CoreBluetooth's manager state.
        #expect(error.errno == code)
    }

    @Test func openingFailsWithAClearError() throws {
        // An index no machine has, so that a machine with Bluetooth and root privileges doesn't
        // hand a real adapter to this test.
        let transport = HCIUserChannelTransport(index: 4242)
        let loop = EventLoop()
        let error = #expect(throws: HCITransportError.self) {
            try transport.open(on: loop, sink: RecordingSink())
        }
        let probe = socket(31, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 1)
        let probeErrno = errno
        if probe >= 0 {
            close(probe)
            #expect(error?.message.hasPrefix("hci4242: ") == true)
        } else if probeErrno == EAFNOSUPPORT {
            // This machine's kernel has no Bluetooth: the path the brief's message describes.
            #expect(error?.message == "hci4242: kernel has no Bluetooth support (EAFNOSUPPORT)")
        } else {
            #expect(error?.message.hasPrefix("hci4242: ") == true)
        }
        // Whichever the failure, its errno comes with it.
        #expect(error?.errno != nil)
        // A failed open leaves the transport inert.
        transport.send(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03))))
        transport.close()
    }
}
