import ATT
import Foundation
import GATT

extension CBError {
    /// An error with Apple's code and a message for `localizedDescription`.
    init(_ code: Code, description: String) {
        self.init(code, userInfo: [NSLocalizedDescriptionKey: description])
    }
}

extension CBATTError {
    /// An error with the ATT code and a message for `localizedDescription`.
    init(_ code: Code, description: String) {
        self.init(code, userInfo: [NSLocalizedDescriptionKey: description])
    }
}

/// How host-stack failures reach the app: as the `CBATTError` or `CBError` Apple would give.
enum StackErrors {
    /// An ATT error code from the peer, with Apple's message for it. Codes Apple's enum lacks
    /// (Database Out Of Sync, application and profile errors) keep their value in
    /// `CBATTErrorDomain`, as an `NSError` that does not cast to `CBATTError`.
    static func attError(_ code: ATTErrorCode) -> any Error {
        if let known = CBATTError.Code(rawValue: Int(code.rawValue)) {
            return CBATTError(known)
        }
        return NSError(domain: CBATTErrorDomain, code: Int(code.rawValue),
                       userInfo: [NSLocalizedDescriptionKey: "\(code)"])
    }

    /// A GATT procedure's failure; nil for a disconnection (the app hears of that instead).
    static func error(_ error: GATTClientError) -> (any Error)? {
        switch error {
        case .attributeError(let code, _): attError(code)
        case .disconnected: nil
        case .timeout: CBError(.connectionTimeout, description: "The peripheral did not answer within 30 seconds.")
        case .notSubscribable: CBATTError(.requestNotSupported)
        case .invalidArgument(let what): CBError(.invalidParameters, description: "The specified parameters are invalid: \(what).")
        case .queueFull: CBError(.outOfSpace, description: "Too many operations are waiting.")
        case .protocolViolation, .writeVerificationFailed, .cannotSend: CBError(.unknown, description: "\(error)")
        case .securityFailed(.peerRemovedPairingInformation): CBError(.peerRemovedPairingInformation)
        case .securityFailed(.encryptionTimedOut): CBError(.encryptionTimedOut)
        }
    }
}
