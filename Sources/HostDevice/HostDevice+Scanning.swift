import HCI
import HCIDriver
import HostStack
import Logging
import Scheduling
import StackLogging

extension HostDevice {
    /// `client` scans: the controller scans (actively, with no duplicate filter: each client
    /// filters and coalesces for itself) while any client does.
    public func startScanning(for client: any HostDeviceClient) {
        assertOnLoop()
        guard let index = entryIndex(client), !isOff else { return }
        clients[index].isScanning = true
        reconcileScan()
    }

    /// `client` stops scanning; the controller stops when no client scans any more.
    public func stopScanning(for client: any HostDeviceClient) {
        assertOnLoop()
        guard let index = entryIndex(client), clients[index].isScanning else { return }
        clients[index].isScanning = false
        reconcileScan()
    }

    /// Brings the controller's scan in line with what the clients want, one command at a time.
    func reconcileScan() {
        guard !scanCommandInFlight, !isOff else { return }
        let wanted = clients.contains { $0.isScanning }
        guard wanted != controllerScanning else { return }
        scanCommandInFlight = true
        let done: (Result<Void, HCIError>) -> Void = { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return }
            self.scanCommandInFlight = false
            switch result {
            case .success:
                self.controllerScanning = wanted
            case .failure(let error) where wanted:
                self.logger.warning("scan could not start: \(error)")
                let refused = self.clients.indices.filter { self.clients[$0].isScanning }
                for index in refused { self.clients[index].isScanning = false }
                for index in refused { self.clients[index].client?.device(self, scanFailed: error) }
            case .failure(let error):
                self.logger.warning("scan could not stop: \(error)")
                self.controllerScanning = false
            }
            self.reconcileScan()
        }
        if wanted {
            host.startScanning(active: true, filterDuplicates: false, completion: done)
        } else {
            host.stopScanning(completion: done)
        }
    }
}
