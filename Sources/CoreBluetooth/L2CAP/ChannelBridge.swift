import Foundation
import HostDevice
import L2CAP
import RoleServices
import Scheduling

/// Joins a role channel (on the device's loop) to the app's streams (any thread): bytes the app
/// writes go to the loop, bytes and room from the loop go to the streams.
///
/// `@unchecked Sendable`: `channel` is used only on `loop` (every transport call hops there);
/// `streams` is set once before the bridge is shared, and is thread-safe itself.
final class ChannelBridge: ChannelStreamTransport, RoleChannelEvents, @unchecked Sendable {
    private let channel: RoleChannel
    private let loop: EventLoop
    /// The streams' shared state, set once when made: it holds neither the streams (so a
    /// channel the app lets go of closes itself) nor this bridge strongly.
    private var streams: ChannelStreamCore!

    private init(channel: RoleChannel, loop: EventLoop) {
        self.channel = channel
        self.loop = loop
    }

    /// Called on the device's loop: the app's `CBL2CAPChannel` over `channel`.
    static func makeChannel(_ channel: RoleChannel, peer: CBPeer, loop: EventLoop) -> CBL2CAPChannel {
        let bridge = ChannelBridge(channel: channel, loop: loop)
        let streams = ChannelStreams(transport: bridge)
        bridge.streams = streams.core
        channel.events = bridge
        return CBL2CAPChannel(peer: peer, psm: channel.psm, inputStream: streams.input, outputStream: streams.output)
    }

    // MARK: From the streams (any thread)

    func streamsWrote(_ bytes: [UInt8]) {
        loop.execute { [self] in channel.write(bytes) }
    }

    func streamsSetReceivePaused(_ paused: Bool) {
        loop.execute { [self] in channel.setReceivePaused(paused) }
    }

    func streamsClosed() {
        loop.execute { [self] in channel.close() }
    }

    // MARK: From the channel (the loop)

    func channel(_ channel: RoleChannel, received bytes: [UInt8]) {
        streams.received(bytes)
    }

    func channel(_ channel: RoleChannel, sent count: Int) {
        streams.sent(count)
    }

    func channel(_ channel: RoleChannel, closed reason: L2CAPChannelCloseReason) {
        switch reason {
        case .local, .remote, .linkLost:
            streams.peerClosed()
        case .protocolError(let what):
            streams.failed(CBError(.unknown, description: "The L2CAP channel failed: \(what)."))
        }
    }
}

extension CBL2CAPChannel {
    /// The app's error for a channel that could not be opened.
    static func openError(_ error: ChannelOpenError) -> any Error {
        switch error {
        case .disconnected:
            CBError(.peripheralDisconnected, description: "The peripheral disconnected.")
        case .security(.peerRemovedPairingInformation):
            CBError(.peerRemovedPairingInformation)
        case .security(.encryptionTimedOut):
            CBError(.encryptionTimedOut)
        case .security:
            CBATTError(.insufficientAuthentication, description: "The channel needs a secure link, and pairing failed.")
        case .l2cap(.refused(.spsmNotSupported)):
            CBError(.unknown, description: "The peer has no L2CAP channel published on this PSM.")
        case .l2cap(.timeout):
            CBError(.connectionTimeout, description: "The peer did not answer the L2CAP channel request.")
        case .l2cap(let failure):
            CBError(.unknown, description: "The L2CAP channel could not be opened: \(failure).")
        case .notSupported(let why):
            CBError(.operationNotSupported, description: why)
        }
    }
}
