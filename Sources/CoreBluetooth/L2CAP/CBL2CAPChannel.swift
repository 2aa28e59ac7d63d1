import Foundation

/// An L2CAP connection-oriented channel to a peer, with streams to read and write it.
/// (Credit-based channels are later work on Linux: opening and publishing report
/// `CBError.Code.operationNotSupported` for now.)
open class CBL2CAPChannel: NSObject, @unchecked Sendable {
    private let peerStorage: CBPeer
    private let psmStorage: CBL2CAPPSM
    private let input: InputStream
    private let output: OutputStream

    init(peer: CBPeer, psm: CBL2CAPPSM, inputStream: InputStream, outputStream: OutputStream) {
        peerStorage = peer
        psmStorage = psm
        input = inputStream
        output = outputStream
        super.init()
    }

    /// The device at the other end.
    open var peer: CBPeer! { peerStorage }
    /// What the peer sends.
    open var inputStream: InputStream! { input }
    /// What goes to the peer.
    open var outputStream: OutputStream! { output }
    /// The channel's protocol/service multiplexer.
    open var psm: CBL2CAPPSM { psmStorage }
}
