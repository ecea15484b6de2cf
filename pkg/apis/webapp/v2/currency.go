/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v2

import (
	"maps"
	"slices"
)

// NoCurrency is ISO 4217's code for "no currency" (transactions where no
// currency is involved). A v1 Book's price, a whole number of an unnamed
// currency, is a v2 price in XXX; like every code whose minor unit ISO 4217
// gives as N.A., XXX takes whole amounts only.
const NoCurrency = "XXX"

// ISO4217Published is the publication date of the ISO 4217 list that
// minorUnits transcribes.
const ISO4217Published = "2026-01-01"

// minorUnits is ISO 4217 list one ("current currency & funds code list"),
// as published on ISO4217Published by SIX Financial Information, the
// standard's maintenance agency, in its list-one.xml: every alphabetic code
// (Ccy) with its minor unit (CcyMnrUnts), the number of decimal places an
// amount in that currency may have. The list's "N.A." (XXX, the precious
// metals XAU XAG XPD XPT, the bond-market units XBA-XBD, XDR, XSU, XUA and
// the testing code XTS) is written 0: a Book's amount in them is a whole
// number.
//
// It is the one list of currencies in this repository: the CRD's currency
// enum and its decimal-places rules (markers on Price in types.go) are
// checked against it by manifests' tests, and the v1 conversion validates
// stashed prices with it. When ISO publishes an amendment, edit this table
// and ISO4217Published, run the tests, and follow what they say.
var minorUnits = map[string]int{
	"AED": 2, // UAE Dirham
	"AFN": 2, // Afghani
	"ALL": 2, // Lek
	"AMD": 2, // Armenian Dram
	"AOA": 2, // Kwanza
	"ARS": 2, // Argentine Peso
	"AUD": 2, // Australian Dollar
	"AWG": 2, // Aruban Florin
	"AZN": 2, // Azerbaijan Manat
	"BAM": 2, // Convertible Mark
	"BBD": 2, // Barbados Dollar
	"BDT": 2, // Taka
	"BHD": 3, // Bahraini Dinar
	"BIF": 0, // Burundi Franc
	"BMD": 2, // Bermudian Dollar
	"BND": 2, // Brunei Dollar
	"BOB": 2, // Boliviano
	"BOV": 2, // Mvdol
	"BRL": 2, // Brazilian Real
	"BSD": 2, // Bahamian Dollar
	"BTN": 2, // Ngultrum
	"BWP": 2, // Pula
	"BYN": 2, // Belarusian Ruble
	"BZD": 2, // Belize Dollar
	"CAD": 2, // Canadian Dollar
	"CDF": 2, // Congolese Franc
	"CHE": 2, // WIR Euro
	"CHF": 2, // Swiss Franc
	"CHW": 2, // WIR Franc
	"CLF": 4, // Unidad de Fomento
	"CLP": 0, // Chilean Peso
	"CNY": 2, // Yuan Renminbi
	"COP": 2, // Colombian Peso
	"COU": 2, // Unidad de Valor Real
	"CRC": 2, // Costa Rican Colon
	"CUP": 2, // Cuban Peso
	"CVE": 2, // Cabo Verde Escudo
	"CZK": 2, // Czech Koruna
	"DJF": 0, // Djibouti Franc
	"DKK": 2, // Danish Krone
	"DOP": 2, // Dominican Peso
	"DZD": 2, // Algerian Dinar
	"EGP": 2, // Egyptian Pound
	"ERN": 2, // Nakfa
	"ETB": 2, // Ethiopian Birr
	"EUR": 2, // Euro
	"FJD": 2, // Fiji Dollar
	"FKP": 2, // Falkland Islands Pound
	"GBP": 2, // Pound Sterling
	"GEL": 2, // Lari
	"GHS": 2, // Ghana Cedi
	"GIP": 2, // Gibraltar Pound
	"GMD": 2, // Dalasi
	"GNF": 0, // Guinean Franc
	"GTQ": 2, // Quetzal
	"GYD": 2, // Guyana Dollar
	"HKD": 2, // Hong Kong Dollar
	"HNL": 2, // Lempira
	"HTG": 2, // Gourde
	"HUF": 2, // Forint
	"IDR": 2, // Rupiah
	"ILS": 2, // New Israeli Sheqel
	"INR": 2, // Indian Rupee
	"IQD": 3, // Iraqi Dinar
	"IRR": 2, // Iranian Rial
	"ISK": 0, // Iceland Krona
	"JMD": 2, // Jamaican Dollar
	"JOD": 3, // Jordanian Dinar
	"JPY": 0, // Yen
	"KES": 2, // Kenyan Shilling
	"KGS": 2, // Som
	"KHR": 2, // Riel
	"KMF": 0, // Comorian Franc
	"KPW": 2, // North Korean Won
	"KRW": 0, // Won
	"KWD": 3, // Kuwaiti Dinar
	"KYD": 2, // Cayman Islands Dollar
	"KZT": 2, // Tenge
	"LAK": 2, // Lao Kip
	"LBP": 2, // Lebanese Pound
	"LKR": 2, // Sri Lanka Rupee
	"LRD": 2, // Liberian Dollar
	"LSL": 2, // Loti
	"LYD": 3, // Libyan Dinar
	"MAD": 2, // Moroccan Dirham
	"MDL": 2, // Moldovan Leu
	"MGA": 2, // Malagasy Ariary
	"MKD": 2, // Denar
	"MMK": 2, // Kyat
	"MNT": 2, // Tugrik
	"MOP": 2, // Pataca
	"MRU": 2, // Ouguiya
	"MUR": 2, // Mauritius Rupee
	"MVR": 2, // Rufiyaa
	"MWK": 2, // Malawi Kwacha
	"MXN": 2, // Mexican Peso
	"MXV": 2, // Mexican Unidad de Inversion (UDI)
	"MYR": 2, // Malaysian Ringgit
	"MZN": 2, // Mozambique Metical
	"NAD": 2, // Namibia Dollar
	"NGN": 2, // Naira
	"NIO": 2, // Cordoba Oro
	"NOK": 2, // Norwegian Krone
	"NPR": 2, // Nepalese Rupee
	"NZD": 2, // New Zealand Dollar
	"OMR": 3, // Rial Omani
	"PAB": 2, // Balboa
	"PEN": 2, // Sol
	"PGK": 2, // Kina
	"PHP": 2, // Philippine Peso
	"PKR": 2, // Pakistan Rupee
	"PLN": 2, // Zloty
	"PYG": 0, // Guarani
	"QAR": 2, // Qatari Rial
	"RON": 2, // Romanian Leu
	"RSD": 2, // Serbian Dinar
	"RUB": 2, // Russian Ruble
	"RWF": 0, // Rwanda Franc
	"SAR": 2, // Saudi Riyal
	"SBD": 2, // Solomon Islands Dollar
	"SCR": 2, // Seychelles Rupee
	"SDG": 2, // Sudanese Pound
	"SEK": 2, // Swedish Krona
	"SGD": 2, // Singapore Dollar
	"SHP": 2, // Saint Helena Pound
	"SLE": 2, // Leone
	"SOS": 2, // Somali Shilling
	"SRD": 2, // Surinam Dollar
	"SSP": 2, // South Sudanese Pound
	"STN": 2, // Dobra
	"SVC": 2, // El Salvador Colon
	"SYP": 2, // Syrian Pound
	"SZL": 2, // Lilangeni
	"THB": 2, // Baht
	"TJS": 2, // Somoni
	"TMT": 2, // Turkmenistan New Manat
	"TND": 3, // Tunisian Dinar
	"TOP": 2, // Pa’anga
	"TRY": 2, // Turkish Lira
	"TTD": 2, // Trinidad and Tobago Dollar
	"TWD": 2, // New Taiwan Dollar
	"TZS": 2, // Tanzanian Shilling
	"UAH": 2, // Hryvnia
	"UGX": 0, // Uganda Shilling
	"USD": 2, // US Dollar
	"USN": 2, // US Dollar (Next day)
	"UYI": 0, // Uruguay Peso en Unidades Indexadas (UI)
	"UYU": 2, // Peso Uruguayo
	"UYW": 4, // Unidad Previsional
	"UZS": 2, // Uzbekistan Sum
	"VED": 2, // Bolívar Soberano
	"VES": 2, // Bolívar Soberano
	"VND": 0, // Dong
	"VUV": 0, // Vatu
	"WST": 2, // Tala
	"XAD": 2, // Arab Accounting Dinar
	"XAF": 0, // CFA Franc BEAC
	"XAG": 0, // Silver; minor unit N.A.
	"XAU": 0, // Gold; minor unit N.A.
	"XBA": 0, // Bond Markets Unit European Composite Unit (EURCO); minor unit N.A.
	"XBB": 0, // Bond Markets Unit European Monetary Unit (E.M.U.-6); minor unit N.A.
	"XBC": 0, // Bond Markets Unit European Unit of Account 9 (E.U.A.-9); minor unit N.A.
	"XBD": 0, // Bond Markets Unit European Unit of Account 17 (E.U.A.-17); minor unit N.A.
	"XCD": 2, // East Caribbean Dollar
	"XCG": 2, // Caribbean Guilder
	"XDR": 0, // SDR (Special Drawing Right); minor unit N.A.
	"XOF": 0, // CFA Franc BCEAO
	"XPD": 0, // Palladium; minor unit N.A.
	"XPF": 0, // CFP Franc
	"XPT": 0, // Platinum; minor unit N.A.
	"XSU": 0, // Sucre; minor unit N.A.
	"XTS": 0, // Codes specifically reserved for testing purposes; minor unit N.A.
	"XUA": 0, // ADB Unit of Account; minor unit N.A.
	"XXX": 0, // The codes assigned for transactions where no currency is involved; minor unit N.A.
	"YER": 2, // Yemeni Rial
	"ZAR": 2, // Rand
	"ZMW": 2, // Zambian Kwacha
	"ZWG": 2, // Zimbabwe Gold
}

// MinorUnits returns the number of decimal places an amount in the ISO 4217
// currency code may have, and whether code is in the table at all.
func MinorUnits(code string) (int, bool) {
	n, ok := minorUnits[code]
	return n, ok
}

// CurrencyCodes returns every ISO 4217 code of the table, sorted.
func CurrencyCodes() []string {
	return slices.Sorted(maps.Keys(minorUnits))
}
