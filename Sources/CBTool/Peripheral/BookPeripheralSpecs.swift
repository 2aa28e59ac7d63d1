/// The book's peripherals (book-apps.md §1.18 and §1.20) as specs: `cbtool demo` runs them, and
/// specs/echo-server.json and specs/led-remote.json say the same in JSON.
enum BookPeripheralSpecs {
    /// EchoServer: service 180C; 2A56 (read, notify) carries the echo of what is written to
    /// 2A57 (write).
    static let echoServer = PeripheralSpec(
        name: "EchoServer", advertisedServices: ["180C"], manufacturerData: nil, position: [1, 0],
        services: [.init(uuid: "180C", primary: true, characteristics: [
            .init(uuid: "2A56", properties: ["read", "notify"], permissions: ["readable", "writeable"],
                  value: nil, text: nil, descriptors: nil, notify: nil, echoTo: nil),
            .init(uuid: "2A57", properties: ["write"], permissions: ["writeable"],
                  value: nil, text: nil, descriptors: nil, notify: nil, echoTo: "2A56"),
        ])])

    /// RemoteLed, advertised as "LedRemote": service 1815; commands `[state, 0x01]` written to
    /// 2A56 (on = 1, off = 2) are confirmed with the same two bytes on 2A57 (read, notify).
    static let ledRemote = PeripheralSpec(
        name: "LedRemote", advertisedServices: ["1815"], manufacturerData: nil, position: [3, 1],
        services: [.init(uuid: "1815", primary: true, characteristics: [
            .init(uuid: "2A57", properties: ["read", "notify"], permissions: ["readable", "writeable"],
                  value: "0201", text: nil, descriptors: nil, notify: nil, echoTo: nil),
            .init(uuid: "2A56", properties: ["write"], permissions: ["writeable"],
                  value: nil, text: nil, descriptors: nil, notify: nil, echoTo: "2A57"),
        ])])
}
