@testable import CoreBluetooth
import Dispatch
import Foundation
import Testing

/// Which lock guards which object (issue 17: a lock per manager, see `ObjectLock`).
@Suite struct ObjectLockTests {
    /// What the stack makes for a central manager shares its lock; another manager has its own.
    @Test func aManagersObjectsShareItsLockAndOtherManagersHaveTheirOwn() throws {
        let fixture = try CentralFixture()
        let peripheral = try fixture.exploredSensor()
        let lock = fixture.central.objectLock
        #expect(peripheral.objectLock === lock)
        let services = try #require(peripheral.services)
        #expect(!services.isEmpty)
        for service in services {
            #expect(service.objectLock === lock)
            for characteristic in service.characteristics ?? [] { #expect(characteristic.objectLock === lock) }
        }
        let queue = DispatchQueue(label: "other manager")
        let other = CBVirtualRadio.withCurrent(fixture.radio) { CBCentralManager(delegate: nil, queue: queue) }
        #expect(other.objectLock !== lock)
    }

    /// The app's attributes each have a lock of their own, and still link up when added to
    /// one another (each link set under its object's lock).
    @Test func mutableAttributesHaveTheirOwnLocksAndStillLink() {
        let service = CBMutableService(type: CBUUID(string: "180D"), primary: true)
        let characteristic = CBMutableCharacteristic(type: CBUUID(string: "2A37"), properties: .notify, value: nil,
                                                     permissions: [])
        let descriptor = CBMutableDescriptor(type: CBUUID(string: "2901"), value: "Rate")
        characteristic.descriptors = [descriptor]
        service.characteristics = [characteristic]
        #expect(characteristic.service === service)
        #expect(descriptor.characteristic === characteristic)
        let locks = [service.objectLock, characteristic.objectLock, descriptor.objectLock].map(ObjectIdentifier.init)
        #expect(Set(locks).count == 3)
    }
}
