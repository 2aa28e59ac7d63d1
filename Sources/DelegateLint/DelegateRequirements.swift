import SwiftParser
import SwiftSyntax

/// One method requirement of a Core Bluetooth delegate protocol.
public struct DelegateRequirement: Hashable, Sendable, CustomStringConvertible {
    /// `CBCentralManagerDelegate`.
    public var protocolName: String
    public var signature: MethodSignature
    /// The declaration to write: `func centralManager(_ central: CBCentralManager, didConnect
    /// peripheral: CBPeripheral)`, on one line.
    public var declaration: String
    /// Parameter names inside the body, as Apple's declaration names them.
    var parameterNames: [String]

    public var description: String { "\(protocolName).\(signature.name)" }
}

extension DelegateRequirement {
    /// Every requirement of CBCentralManagerDelegate, CBPeripheralDelegate and
    /// CBPeripheralManagerDelegate.
    ///
    /// The lint runs on sources of any project, without ours beside it, so it carries the
    /// requirements. They are the protocols' declarations in Sources/CoreBluetooth, copied
    /// without their comments; a test parses those files and checks they are the same.
    public static let all: [DelegateRequirement] = requirements(declaredIn: declarations)

    /// The method requirements of the protocols declared in `source`, in order.
    public static func requirements(declaredIn source: String) -> [DelegateRequirement] {
        let tree = Parser.parse(source: source)
        let converter = SourceLocationConverter(fileName: "", tree: tree)
        var result: [DelegateRequirement] = []
        for statement in tree.statements {
            guard let proto = statement.item.as(ProtocolDeclSyntax.self) else { continue }
            for member in proto.memberBlock.members {
                guard let function = member.decl.as(FunctionDeclSyntax.self) else { continue }
                let method = ParsedMethod(function, converter: converter, file: "")
                result.append(DelegateRequirement(protocolName: proto.name.text, signature: method.signature,
                                                  declaration: method.declaration, parameterNames: method.parameterNames))
            }
        }
        return result
    }

    /// The names of the delegate protocols.
    public static let protocolNames: Set<String> = Set(all.map(\.protocolName))

    static let declarations = """
        protocol CBCentralManagerDelegate {
            func centralManagerDidUpdateState(_ central: CBCentralManager)
            func centralManager(_ central: CBCentralManager, willRestoreState dict: [String: Any])
            func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any], rssi RSSI: NSNumber)
            func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral)
            func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?)
            func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?)
            func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, timestamp: CFAbsoluteTime, isReconnecting: Bool, error: Error?)
            func centralManager(_ central: CBCentralManager, connectionEventDidOccur event: CBConnectionEvent, for peripheral: CBPeripheral)
            func centralManager(_ central: CBCentralManager, didUpdateANCSAuthorizationFor peripheral: CBPeripheral)
        }

        protocol CBPeripheralDelegate {
            func peripheralDidUpdateName(_ peripheral: CBPeripheral)
            func peripheral(_ peripheral: CBPeripheral, didModifyServices invalidatedServices: [CBService])
            func peripheralDidUpdateRSSI(_ peripheral: CBPeripheral, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didReadRSSI RSSI: NSNumber, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didDiscoverIncludedServicesFor service: CBService, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didWriteValueFor characteristic: CBCharacteristic, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didDiscoverDescriptorsFor characteristic: CBCharacteristic, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor descriptor: CBDescriptor, error: Error?)
            func peripheral(_ peripheral: CBPeripheral, didWriteValueFor descriptor: CBDescriptor, error: Error?)
            func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral)
            func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?)
        }

        protocol CBPeripheralManagerDelegate {
            func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager)
            func peripheralManager(_ peripheral: CBPeripheralManager, willRestoreState dict: [String: Any])
            func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?)
            func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?)
            func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic)
            func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didUnsubscribeFrom characteristic: CBCharacteristic)
            func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest)
            func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest])
            func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager)
            func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?)
            func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?)
            func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?)
        }
        """
}
