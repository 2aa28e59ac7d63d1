import CoreBluetooth
import Foundation

/// `cbtool pair`'s pairing agent: a user at a terminal. Every question first names the method
/// the devices chose, so that a user who expected a passkey and is offered Just Works (a
/// method-confusion attack, or a peer that cannot do better) sees it.
///
/// `handle` runs on the session's delegate queue: it answers at once when the command line
/// already holds the answer, and otherwise reads the user's line on a queue of its own, so
/// that neither the delegate queue nor the stack's loop waits on a person (the stack holds a
/// virtual clock meanwhile, and fails the pairing after 30 s without an answer).
final class TerminalPairingAgent: CBPairingAgent, @unchecked Sendable {
    // Immutable but for `methodsStorage`, which is under `lock`.
    let ioCapability: CBPairingIOCapability
    private let passkey: UInt32?
    private let confirmNumbers: Bool
    private let context: ToolContext
    private let input = DispatchQueue(label: "cbtool.pairing.input")
    private let lock = NSLock()
    private var methodsStorage: [CBPairingMethod] = []

    /// `passkey` is typed when one is asked for (else the user types it); `confirmNumbers`
    /// accepts a numeric comparison without asking.
    init(io: PairingIO, passkey: UInt32?, confirmNumbers: Bool, context: ToolContext) {
        ioCapability = io.capability
        self.passkey = passkey
        self.confirmNumbers = confirmNumbers
        self.context = context
    }

    /// The methods the questions named, in order.
    var methods: [CBPairingMethod] { lock.withLock { methodsStorage } }

    func handle(_ request: CBPairingRequest) {
        lock.withLock { methodsStorage.append(request.method) }
        let context = context
        context.print("method: \(PairingText.method(request.method))")
        switch request.kind {
        case .confirmPairing:
            context.print("Just Works: accepted, with no protection against a man in the middle (neither side could show and check a code)")
            request.accept()
        case .displayPasskey(let value):
            context.print("passkey: \(PairingText.sixDigits(value)) (type it on the device)")
            request.accept()
        case .enterPasskey:
            if let passkey {
                context.print("typing the passkey given with --passkey")
                return request.enterPasskey(passkey)
            }
            input.async {
                context.error("enter the passkey the device shows (6 digits):")
                guard let line = context.readLine(), let value = PairingText.passkey(line) else {
                    context.error("no passkey entered: rejected")
                    return request.reject()
                }
                request.enterPasskey(value)
            }
        case .confirmNumber(let value):
            context.print("number: \(PairingText.sixDigits(value)) (the device must show the same)")
            if confirmNumbers {
                context.print("confirmed with --yes")
                return request.accept()
            }
            input.async {
                context.error("does the device show \(PairingText.sixDigits(value))? [y/N]")
                let answer = context.readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                if answer == "y" || answer == "yes" {
                    request.accept()
                } else {
                    context.error("not confirmed: rejected")
                    request.reject()
                }
            }
        case .outOfBandData:
            context.print("out-of-band data cannot be given from cbtool: rejected")
            request.reject()
        }
    }
}

extension CentralSession {
    /// Pairs with the connected `peripheral` through the manager's agent and waits for the
    /// outcome (a person may be answering: longer than the 30 s the pairing itself may take).
    func pair(_ peripheral: CBPeripheral, seconds: Double = 60) throws {
        let outcome = PairingOutcome()
        manager.linuxPair(peripheral) { error in outcome.finish(error) }
        context.wait(seconds: seconds) { [self] in outcome.isDone || !isConnected(peripheral) }
        guard outcome.isDone else {
            throw ToolError(isConnected(peripheral) ? "no pairing outcome in \(Self.format(seconds)) s" : "the device disconnected")
        }
        if let error = outcome.error {
            throw ToolError(error is CBLinuxPairingError ? "\(error)" : Self.describe(error))
        }
    }
}

/// A pairing's completion, set on the delegate queue and read by the waiting command.
private final class PairingOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private var failure: (any Error)?

    func finish(_ error: (any Error)?) {
        lock.withLock {
            done = true
            failure = error
        }
    }

    var isDone: Bool { lock.withLock { done } }
    var error: (any Error)? { lock.withLock { failure } }
}
