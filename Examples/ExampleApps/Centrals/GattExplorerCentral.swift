import CoreBluetooth
import Foundation

/// A discovered service and its characteristics, with the abilities the book's cells show.
public struct ExploredService: Sendable, Equatable {
    public var uuid: String
    public var isPrimary: Bool
    public var characteristics: [(uuid: String, properties: [String])]

    public static func == (a: ExploredService, b: ExploredService) -> Bool {
        a.uuid == b.uuid && a.isPrimary == b.isPrimary
            && a.characteristics.map(\.uuid) == b.characteristics.map(\.uuid)
            && a.characteristics.map(\.properties) == b.characteristics.map(\.properties)
    }
}

/// The book's ch. 6 "Services" GATT explorer (book-apps.md §1.6, with the ch. 7–9 labels):
/// connects to `targetName`, discovers every service and every characteristic, prints the
/// profile (a section per service UUID, a row per characteristic UUID with readable / writeable
/// / notifiable), and leaves.
public final class GattExplorerCentral: BookCentral, @unchecked Sendable {
    private let profile = Protected((services: [ExploredService](), pending: 0))

    /// The GATT profile, in discovery order.
    public var gattProfile: [ExploredService] { profile.value.services }

    public init(targetName: String = MyDevicePeripheral.advertisingName, queue: DispatchQueue? = nil,
                position: [Double]? = nil, log: ExampleLog = ExampleLog(), onDone: @escaping @Sendable (_ failure: String?) -> Void = { _ in }) {
        super.init(targetName: targetName, serviceUuid: nil, characteristicUuid: nil, queue: queue, position: position,
                   log: log, onDone: onDone)
    }

    override func connected(_ peripheral: CBPeripheral) {
        peripheral.discoverServices(nil)
    }

    override func characteristicsDiscovered(for service: CBService, on peripheral: CBPeripheral) {
        let explored = ExploredService(
            uuid: service.uuid.uuidString, isPrimary: service.isPrimary,
            characteristics: (service.characteristics ?? []).map { ($0.uuid.uuidString, propertyNames($0.properties)) })
        for characteristic in explored.characteristics { log("-> \(characteristic.uuid)") }
        let complete = profile.update { state -> Bool in
            state.services.append(explored)
            return state.services.count == (peripheral.services ?? []).count
        }
        guard complete else { return }
        log("GATT profile of \(targetName):")
        for service in gattProfile {
            log("  \(service.uuid)\(service.isPrimary ? "" : " (secondary)")")
            for characteristic in service.characteristics {
                log("    \(characteristic.uuid)  \(characteristic.properties.joined(separator: ", "))")
            }
        }
        leave()
    }
}
